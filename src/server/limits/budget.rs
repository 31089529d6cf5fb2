//! A request body whose messages are admitted against the server-wide byte budget,
//! with compressed messages inflated on the blocking pool.

use std::future::Future;
use std::net::IpAddr;
use std::ops::ControlFlow;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{BufMut, Bytes, BytesMut};
use futures::future::BoxFuture;
use http_body::Frame;
use parking_lot::Mutex;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Sleep;
use tonic::body::Body;
use tonic::Status;

use super::inflate::{self, Inflate};
use super::{units, CallLimits, Requests, BUDGET_UNIT, GRPC_HEADER, MESSAGE_COPIES};
use crate::server::connection::admission::{FairShare, Holder, Refusal, Share};
use crate::service::connect::JsonBody;
use crate::service::memory::{MemoryHold, RequestMemory};
use crate::service::stream_idle_status;

/// Where a request body is between gRPC messages.
enum Phase {
    /// Reading a 5-byte message header.
    Header,
    /// A header announced a message of `len` bytes; its payload has not begun, so it
    /// holds nothing yet. Once the payload begins, it waits here for its bytes.
    Announced { compressed: bool, len: usize },
    /// Passing on the rest of an uncompressed message.
    Passing { left: usize },
    /// Collecting a message of `len` bytes: a compressed one to inflate it whole, a
    /// solver request to charge it what it decodes to.
    Collecting { compressed: bool, len: usize },
    /// Waiting for one of the few inflation slots, holding the compressed message.
    AwaitingInflation { message: Bytes, slot: BoxFuture<'static, Option<OwnedSemaphorePermit>> },
    /// Inflating a compressed message on the blocking pool.
    Inflating(Job),
    /// Waiting for a slot (the inflations' slots) to decode a whole Connect JSON message,
    /// holding it.
    AwaitingTranscode { message: Bytes, slot: BoxFuture<'static, Option<OwnedSemaphorePermit>> },
    /// Decoding a Connect JSON message into protobuf on the blocking pool.
    Transcoding(Job),
}

/// A message inflated or transcoded on the blocking pool: the frame, and the share it held.
type Job = tokio::task::JoinHandle<(Result<Vec<u8>, Status>, Share)>;

/// What a [`Job`] ends with.
type JobDone = Result<(Result<Vec<u8>, Status>, Share), tokio::task::JoinError>;

/// What one phase's step leaves: `Continue` in the phase it moved to, or `Break` with the
/// answer to the poll.
type Step = ControlFlow<Poll<Option<Result<Bytes, Status>>>>;

/// What a call's request messages are: how they are compressed, and what they carry.
#[derive(Debug, Clone, Copy)]
pub(super) struct Messages {
    /// Their compression, when it is one this layer inflates.
    pub(super) inflate: Option<Inflate>,
    /// What they carry, for charging them decoded.
    pub(super) requests: Requests,
    /// A Connect JSON call's: each message is decoded into protobuf here.
    pub(super) json: Option<JsonBody>,
}

/// A request body whose messages are admitted against the server-wide budget and whose
/// compressed messages are inflated (tonic then sees uncompressed ones).
pub(super) struct Budgeted {
    inner: Body,
    inflate: Option<Inflate>,
    /// What the messages are, for charging them decoded.
    requests: Requests,
    json: Option<JsonBody>,
    buf: BytesMut,
    phase: Phase,
    messages: u64,
    /// Whose budget the messages take.
    peer: IpAddr,
    /// The call, ended if its bytes are taken back for another client.
    holder: Arc<dyn Holder>,
    held: Arc<Mutex<Option<Share>>>,
    budget: Arc<FairShare>,
    limits: Arc<CallLimits>,
    idle: Option<Pin<Box<Sleep>>>,
}

impl Budgeted {
    /// A body over `inner` whose messages take their bytes from `budget` into `held`,
    /// for `holder`.
    pub(super) fn new(
        inner: Body,
        messages: Messages,
        peer: IpAddr,
        holder: Arc<dyn Holder>,
        held: Arc<Mutex<Option<Share>>>,
        budget: Arc<FairShare>,
        limits: Arc<CallLimits>,
    ) -> Self {
        Budgeted {
            inner,
            inflate: messages.inflate,
            requests: messages.requests,
            json: messages.json,
            buf: BytesMut::new(),
            phase: Phase::Header,
            messages: 0,
            peer,
            holder,
            held,
            budget,
            limits,
            idle: None,
        }
    }

    /// True while the call owes the server bytes it should be sending: its first message,
    /// or the rest of a message it has begun.
    fn owes_bytes(&self) -> bool {
        self.messages == 0 || !matches!(self.phase, Phase::Header) || !self.buf.is_empty()
    }

    /// Moves the body on with what is buffered; `Some` is a frame for tonic. Each phase of
    /// the state machine drawn in [`Phase`] has its step, a method named after what it
    /// does: it moves to another phase (and the loop goes on) or answers the poll.
    fn step(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, Status>>> {
        loop {
            let step = match &mut self.phase {
                Phase::Header => self.read_header(),
                Phase::Announced { compressed, len } => {
                    let (compressed, len) = (*compressed, *len);
                    self.take_share(compressed, len, cx)
                }
                Phase::Passing { left } => {
                    let left = *left;
                    self.pass_buffered(left)
                }
                Phase::Collecting { compressed, len } => {
                    let (compressed, len) = (*compressed, *len);
                    self.collect(compressed, len)
                }
                Phase::AwaitingInflation { message, slot } => {
                    let Poll::Ready(slot) = slot.as_mut().poll(cx) else { return Poll::Pending };
                    let message = std::mem::take(message);
                    self.start_inflating(message, slot)
                }
                Phase::Inflating(job) => {
                    let Poll::Ready(done) = Pin::new(job).poll(cx) else { return Poll::Pending };
                    self.inflated(done)
                }
                Phase::AwaitingTranscode { message, slot } => {
                    let Poll::Ready(slot) = slot.as_mut().poll(cx) else { return Poll::Pending };
                    let message = std::mem::take(message);
                    self.start_transcoding(message, slot)
                }
                Phase::Transcoding(job) => {
                    let Poll::Ready(done) = Pin::new(job).poll(cx) else { return Poll::Pending };
                    self.transcoded(done)
                }
            };
            if let ControlFlow::Break(poll) = step {
                return poll;
            }
        }
    }

    /// `Header`: reads the next message's header, once it is buffered whole.
    fn read_header(&mut self) -> Step {
        if self.buf.len() < GRPC_HEADER {
            return ControlFlow::Break(Poll::Ready(None));
        }
        let compressed = self.buf[0] == 1;
        let len = u32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]]) as usize;
        if len > self.limits.max_message_bytes {
            // tonic refuses it from its header, before reading any of it.
            self.phase = Phase::Passing { left: GRPC_HEADER };
            return ControlFlow::Continue(());
        }
        // The previous message's bytes are the call's to free now.
        self.held.lock().take();
        self.phase = Phase::Announced { compressed, len };
        ControlFlow::Continue(())
    }

    /// `Announced`: once the payload begins, takes the message's share of the budget
    /// (waiting for it), and chooses how the message goes on.
    fn take_share(&mut self, compressed: bool, len: usize, cx: &mut Context<'_>) -> Step {
        if len > 0 && self.buf.len() <= GRPC_HEADER {
            return ControlFlow::Break(Poll::Ready(None));
        }
        // A message larger than what a client may hold runs alone within it.
        let wanted = (units(len + GRPC_HEADER) * MESSAGE_COPIES).min(self.budget.policy().per_client);
        let Poll::Ready(share) = self.budget.poll_take(self.peer, wanted, &self.holder, cx) else {
            return ControlFlow::Break(Poll::Pending);
        };
        *self.held.lock() = Some(share);
        self.phase = match (compressed, self.inflate, self.requests) {
            (true, Some(_), _) => Phase::Collecting { compressed, len },
            (false, _, Requests::OneProblem | Requests::Problems) => {
                // Paid for: the message's room at once, not by doubling.
                self.buf.reserve((GRPC_HEADER + len).saturating_sub(self.buf.len()));
                Phase::Collecting { compressed, len }
            }
            // Another service's, or compressed without a known encoding, which tonic
            // refuses.
            _ => Phase::Passing { left: len + GRPC_HEADER },
        };
        ControlFlow::Continue(())
    }

    /// `Passing`: passes on what is buffered of the message's `left` bytes.
    fn pass_buffered(&mut self, left: usize) -> Step {
        if self.buf.is_empty() {
            return ControlFlow::Break(Poll::Ready(None));
        }
        let take = left.min(self.buf.len());
        self.passed(left, take);
        ControlFlow::Break(Poll::Ready(Some(Ok(self.buf.split_to(take).freeze()))))
    }

    /// Counts `take` of the `left` bytes of a message being passed on as passed.
    fn passed(&mut self, left: usize, take: usize) {
        match left - take {
            0 => self.message_done(),
            left => self.phase = Phase::Passing { left },
        }
    }

    /// A message handed on whole: the next is read from its header.
    fn message_done(&mut self) {
        self.phase = Phase::Header;
        self.messages += 1;
    }

    /// `Collecting`: once the message is buffered whole, it waits to be inflated or decoded
    /// from JSON, or is charged what it decodes to and handed on.
    fn collect(&mut self, compressed: bool, len: usize) -> Step {
        if self.buf.len() < GRPC_HEADER + len {
            return ControlFlow::Break(Poll::Ready(None));
        }
        let message = self.take_message(GRPC_HEADER + len);
        if compressed {
            self.phase = Phase::AwaitingInflation { message, slot: inflate::slot() };
            return ControlFlow::Continue(());
        }
        if self.json.is_some() {
            self.phase = Phase::AwaitingTranscode { message, slot: inflate::slot() };
            return ControlFlow::Continue(());
        }
        self.message_done();
        ControlFlow::Break(Poll::Ready(Some(self.charge_decoded(&message).map(|()| message))))
    }

    /// `AwaitingInflation`, its slot taken: inflates the compressed `message` on the
    /// blocking pool.
    fn start_inflating(&mut self, message: Bytes, slot: Option<OwnedSemaphorePermit>) -> Step {
        let (Some(inflate), Some(mut held)) = (self.inflate, self.held.lock().take()) else {
            let status = Status::internal("inflating without an encoding or budget");
            return ControlFlow::Break(Poll::Ready(Some(Err(status))));
        };
        let limit = self.limits.max_message_bytes;
        // Inflating 60 MB takes a tenth of a second: off the async workers.
        let job = tokio::task::spawn_blocking(move || {
            let _slot = slot;
            (inflate.inflate(&message[GRPC_HEADER..], limit, &mut held), held)
        });
        self.phase = Phase::Inflating(job);
        ControlFlow::Continue(())
    }

    /// `Inflating`, done: a JSON message waits to be decoded next; any other is charged
    /// what it decodes to and handed on.
    fn inflated(&mut self, done: JobDone) -> Step {
        let frame = match self.job_frame(done, "inflating the request") {
            Ok(frame) if self.json.is_some() => {
                let message = Bytes::from(frame);
                self.phase = Phase::AwaitingTranscode { message, slot: inflate::slot() };
                return ControlFlow::Continue(());
            }
            inflated => inflated,
        };
        self.hand_on(frame)
    }

    /// `AwaitingTranscode`, its slot taken: decodes the Connect JSON `message` into its
    /// protobuf frame on the blocking pool.
    fn start_transcoding(&mut self, message: Bytes, slot: Option<OwnedSemaphorePermit>) -> Step {
        // Only the JSON's slice is kept: the job drops it once decoded.
        let message = message.slice(GRPC_HEADER..);
        let (Some(json), Some(mut held)) = (self.json, self.held.lock().take()) else {
            let status = Status::internal("decoding JSON without its budget");
            return ControlFlow::Break(Poll::Ready(Some(Err(status))));
        };
        let max = self.limits.max_message_bytes;
        // Decoding 60 MiB of JSON takes a second: off the async workers, one a core at
        // most, so that other clients' calls are answered meanwhile.
        let job = tokio::task::spawn_blocking(move || {
            let _slot = slot;
            let transcoded = json
                .transcode(message, max, &mut |bytes, decoded| fit(&mut held, units(bytes), decoded, max));
            (transcoded, held)
        });
        self.phase = Phase::Transcoding(job);
        ControlFlow::Continue(())
    }

    /// `Transcoding`, done: the protobuf frame, charged what it decodes to, handed on.
    fn transcoded(&mut self, done: JobDone) -> Step {
        let frame = self.job_frame(done, "decoding the JSON request");
        self.hand_on(frame)
    }

    /// The frame a finished job made (`doing` names the job when it failed); the share it
    /// held is the call's again.
    fn job_frame(&mut self, done: JobDone, doing: &str) -> Result<Vec<u8>, Status> {
        match done {
            Ok((frame, held)) => {
                *self.held.lock() = Some(held);
                frame
            }
            Err(err) => Err(Status::internal(format!("{doing} failed: {err}"))),
        }
    }

    /// Hands on a whole solver request `frame` (or the job's error), charged what it
    /// decodes to.
    fn hand_on(&mut self, frame: Result<Vec<u8>, Status>) -> Step {
        self.message_done();
        let charged = frame.and_then(|frame| self.charge_decoded(&frame).map(|()| frame));
        ControlFlow::Break(Poll::Ready(Some(charged.map(Bytes::from))))
    }

    /// The first `len` bytes buffered, as a message of their own. The rest is moved out of
    /// the allocation they share (a few bytes of the next message, at most a read's worth),
    /// so that the message's memory goes when the message does: left shared, a 60 MiB
    /// message stayed allocated, unseen by the budget, until the call ended.
    fn take_message(&mut self, len: usize) -> Bytes {
        let message = self.buf.split_to(len).freeze();
        self.buf = BytesMut::from(&self.buf[..]);
        message
    }

    /// Charges a whole solver request `frame` (header included) its bytes and what it
    /// decodes to, in place of the copies charged while it arrived ([`fit`]).
    fn charge_decoded(&self, frame: &[u8]) -> Result<(), Status> {
        let one_problem = match self.requests {
            Requests::OneProblem => true,
            Requests::Problems => false,
            Requests::Other => return Ok(()),
        };
        let decoded = crate::codec::decoded_request_bytes(&frame[GRPC_HEADER..], one_problem);
        let cost = units(frame.len()) + units(decoded);
        let mut held = self.held.lock();
        let Some(share) = held.as_mut() else { return Ok(()) };
        fit(share, cost, decoded, self.limits.max_message_bytes)
    }

    /// The head of `data` that a message being passed on takes, split off without a copy
    /// when nothing is buffered before it (tonic gathers the message anyway: copying it
    /// into `buf` first was a second copy of every Flight batch).
    fn pass_through(&mut self, data: &mut Bytes) -> Option<Bytes> {
        let Phase::Passing { left } = self.phase else { return None };
        if !self.buf.is_empty() || data.is_empty() {
            return None;
        }
        let take = left.min(data.len());
        self.passed(left, take);
        Some(data.split_to(take))
    }

    /// Ends a call that owes bytes and has sent none for the stream idle timeout.
    fn poll_idle(&mut self, cx: &mut Context<'_>) -> Poll<Status> {
        let Some(timeout) = self.limits.stream_idle_timeout else {
            return Poll::Pending;
        };
        if !self.owes_bytes() {
            self.idle = None;
            return Poll::Pending;
        }
        let idle = self.idle.get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match idle.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(stream_idle_status(timeout)),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl http_body::Body for Budgeted {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = &mut *self;
        loop {
            match this.step(cx) {
                Poll::Ready(Some(result)) => return Poll::Ready(Some(result.map(Frame::data))),
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => {}
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(mut data) => {
                        this.idle = None;
                        let head = this.pass_through(&mut data);
                        this.buf.put(&mut data);
                        if let Some(head) = head {
                            return Poll::Ready(Some(Ok(Frame::data(head))));
                        }
                    }
                    Err(frame) => return Poll::Ready(Some(Ok(frame))),
                },
                Poll::Ready(Some(Err(status))) => return Poll::Ready(Some(Err(status))),
                Poll::Ready(None) => {
                    // A truncated message: tonic reports the unexpected end.
                    return Poll::Ready(
                        (!this.buf.is_empty()).then(|| Ok(Frame::data(this.buf.split().freeze()))),
                    );
                }
                Poll::Pending => {
                    return match this.poll_idle(cx) {
                        Poll::Ready(status) => Poll::Ready(Some(Err(status))),
                        Poll::Pending => Poll::Pending,
                    }
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.buf.is_empty() && matches!(self.phase, Phase::Header) && self.inner.is_end_stream()
    }
}

/// What a message costing `cost` units may hold of a client's `cap`: its cost; the whole
/// cap, to run alone, when it costs more but no more than the largest message could as
/// its bytes and a copy (what it was charged before its decoded size was known); beyond
/// that, `None`: it is refused.
fn wanted(cost: usize, cap: usize, max_message_bytes: usize) -> Option<usize> {
    let copies = units(max_message_bytes + GRPC_HEADER) * MESSAGE_COPIES;
    match cost {
        _ if cost <= cap => Some(cost),
        _ if cost <= copies => Some(cap),
        _ => None,
    }
}

/// The status of a message that decodes to `decoded` bytes, past what one client may hold.
fn past_cap(decoded: usize, cap: usize) -> Status {
    Status::resource_exhausted(format!(
        "request message decodes to {decoded} bytes, past the {} bytes of request memory one client may hold",
        cap * BUDGET_UNIT
    ))
}

/// The status of a take the budget refused.
fn refused(refusal: Refusal, decoded: usize, cap: usize) -> Status {
    match refusal {
        Refusal::PeerCap => past_cap(decoded, cap),
        Refusal::Full { .. } => Status::resource_exhausted(
            "server overloaded: its memory for request messages is in use; retry later",
        ),
    }
}

/// Makes `share` hold what a message decoding to `decoded` bytes and costing `cost` units
/// may ([`wanted`]): it grows (never waiting, as inflating does) or gives back the
/// difference.
pub(super) fn fit(
    share: &mut Share,
    cost: usize,
    decoded: usize,
    max_message_bytes: usize,
) -> Result<(), Status> {
    let cap = share.cap();
    let wanted = wanted(cost, cap, max_message_bytes).ok_or_else(|| past_cap(decoded, cap))?;
    if wanted <= share.amount() {
        share.shrink_to(wanted);
        return Ok(());
    }
    share.try_grow(wanted - share.amount()).map_err(|refusal| refused(refusal, decoded, cap))
}

/// A call's share of the request memory, for a door to hold what it decodes
/// ([`crate::service::memory`]).
#[derive(Debug)]
pub(super) struct CallMemoryShare {
    pub(super) peer: IpAddr,
    pub(super) holder: Arc<dyn Holder>,
    /// The share of the call's latest request message, as the body took it.
    pub(super) held: Arc<Mutex<Option<Share>>>,
    pub(super) budget: Arc<FairShare>,
    pub(super) limits: Arc<CallLimits>,
}

impl RequestMemory for CallMemoryShare {
    fn hold_message(&self, bytes: usize) -> Result<MemoryHold, Status> {
        let Some(mut share) = self.held.lock().take() else { return self.hold(bytes) };
        fit(&mut share, units(bytes), bytes, self.limits.max_message_bytes)?;
        Ok(MemoryHold::new(share))
    }

    fn hold(&self, bytes: usize) -> Result<MemoryHold, Status> {
        let cap = self.budget.policy().per_client;
        let wanted =
            wanted(units(bytes), cap, self.limits.max_message_bytes).ok_or_else(|| past_cap(bytes, cap))?;
        let share = self
            .budget
            .try_take(self.peer, wanted, Arc::clone(&self.holder))
            .map_err(|refusal| refused(refusal, bytes, cap))?;
        Ok(MemoryHold::new(share))
    }
}
