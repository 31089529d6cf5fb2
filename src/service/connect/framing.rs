//! The gRPC side of a Connect body: a request body framed as the one gRPC message it
//! carries (announced from its length and streamed through, or gathered up to the message
//! limit), and the one message read back out of a unary gRPC answer.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{BufMut, Bytes, BytesMut};
use http_body::{Frame, SizeHint};
use tonic::body::Body;
use tonic::Status;

/// Length of a gRPC message header: the compressed flag and a big-endian `u32` length.
pub(super) const GRPC_HEADER: usize = 5;

/// The parts of a [`FramedBody`] before its state is known.
pub(super) struct Framed {
    pub(super) inner: Body,
    pub(super) compressed: bool,
    /// `--max-message-bytes`: a longer body is announced and never read.
    pub(super) limit: usize,
}

impl Framed {
    /// A body of `len` bytes: the header goes first, then the bytes as they come.
    pub(super) fn announced(self, len: usize) -> FramedBody {
        FramedBody { framed: self, state: FrameState::Announce { len } }
    }

    /// A body of unknown length: gathered up to the limit, then sent whole.
    pub(super) fn gathered(self) -> FramedBody {
        FramedBody { framed: self, state: FrameState::Gathering(BytesMut::new()) }
    }
}

/// A Connect request body as one gRPC message; see the module docs.
pub(super) struct FramedBody {
    framed: Framed,
    state: FrameState,
}

enum FrameState {
    Announce { len: usize },
    Passing,
    Gathering(BytesMut),
    Done,
}

impl FramedBody {
    fn header(&self, len: usize) -> [u8; GRPC_HEADER] {
        let len = u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes();
        [u8::from(self.framed.compressed), len[0], len[1], len[2], len[3]]
    }
}

impl http_body::Body for FramedBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = &mut *self;
        let limit = this.framed.limit;
        loop {
            match &mut this.state {
                FrameState::Announce { len } => {
                    let len = *len;
                    // A body above the limit is never read: the limits and tonic refuse the
                    // message from its header, as they do a gRPC one.
                    this.state = match len > limit {
                        true => FrameState::Done,
                        false => FrameState::Passing,
                    };
                    return Poll::Ready(Some(Ok(Frame::data(Bytes::copy_from_slice(&this.header(len))))));
                }
                FrameState::Passing => {
                    return match std::task::ready!(Pin::new(&mut this.framed.inner).poll_frame(cx)) {
                        Some(Ok(frame)) => match frame.into_data() {
                            Ok(data) => Poll::Ready(Some(Ok(Frame::data(data)))),
                            // HTTP trailers on a request carry nothing for a unary call.
                            Err(_) => continue,
                        },
                        Some(Err(status)) => Poll::Ready(Some(Err(status))),
                        None => {
                            this.state = FrameState::Done;
                            Poll::Ready(None)
                        }
                    };
                }
                FrameState::Gathering(bytes) => {
                    let done = match std::task::ready!(Pin::new(&mut this.framed.inner).poll_frame(cx)) {
                        Some(Ok(frame)) => {
                            if let Ok(mut data) = frame.into_data() {
                                bytes.put(&mut data);
                            }
                            bytes.len() > limit
                        }
                        Some(Err(status)) => return Poll::Ready(Some(Err(status))),
                        None => true,
                    };
                    if !done {
                        continue;
                    }
                    let bytes = std::mem::take(bytes);
                    let header = this.header(bytes.len());
                    this.state = FrameState::Done;
                    // Above the limit only the header goes on, and the limits refuse it.
                    let message = match bytes.len() > limit {
                        true => Bytes::new(),
                        false => bytes.freeze(),
                    };
                    let mut frame = BytesMut::with_capacity(GRPC_HEADER + message.len());
                    frame.put_slice(&header);
                    frame.put(message);
                    return Poll::Ready(Some(Ok(Frame::data(frame.freeze()))));
                }
                FrameState::Done => return Poll::Ready(None),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.state, FrameState::Done)
    }

    fn size_hint(&self) -> SizeHint {
        match &self.state {
            FrameState::Announce { len } if *len <= self.framed.limit => {
                SizeHint::with_exact((GRPC_HEADER + len) as u64)
            }
            _ => SizeHint::default(),
        }
    }
}

/// The one uncompressed message of a unary gRPC response body.
pub(super) fn grpc_message(data: &Bytes) -> Result<&[u8], String> {
    let Some(header) = data.get(..GRPC_HEADER) else {
        return Err("the call answered OK without a message".to_owned());
    };
    if header[0] != 0 {
        return Err("the answer came compressed, which the door did not ask for".to_owned());
    }
    let len = u32::from_be_bytes([header[1], header[2], header[3], header[4]]) as usize;
    data.get(GRPC_HEADER..GRPC_HEADER + len).ok_or_else(|| "the answer's message is cut short".to_owned())
}
