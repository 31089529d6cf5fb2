//! What a connection sends and how: the `Door` trait, and the gRPC door
//! (`SolveBatchStream` through a pass-through codec).

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt, TryStreamExt};
use prost::bytes::{Buf, BufMut, Bytes};
use tokio_stream::wrappers::ReceiverStream;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::transport::Channel;
use tonic::Status;

use super::config::ConnectionConfig;
use super::failure::Failure;
use super::server::Server;
use crate::client::answer_check::{self, WrongAnswer};
use crate::client::batch::Batch;
use crate::pb;

/// The bulk RPC's method name; its HTTP/2 path is `/{SERVICE_NAME}/{SOLVE_BATCH_STREAM}`.
const SOLVE_BATCH_STREAM: &str = "SolveBatchStream";

/// What a connection sends and how: the gRPC bulk call ([`Grpc`]) or a Flight exchange
/// (`flight::Flight`). The connection around it (the window, retries, hand-backs) is the same.
pub(crate) trait Door: Send + Sync + 'static {
    /// A batch as it goes on the wire, kept until its answer is written; also the answer's type.
    type Payload: Clone + Send + Sync + 'static;
    /// What a call is opened on: a channel to the server, or what stands for one.
    type Link: Send + 'static;

    /// Connects to `server`.
    fn link<'a>(&'a self, server: &'a Server) -> BoxFuture<'a, Result<Self::Link, tonic::transport::Error>>;

    /// Opens one call on `link`, whose requests come from `requests`; its answers come
    /// in request order.
    fn open(
        &self,
        link: Self::Link,
        config: &ConnectionConfig,
        requests: tokio::sync::mpsc::Receiver<Self::Payload>,
    ) -> BoxFuture<'static, Result<Answers<Self::Payload>, Failure>>;

    /// Why `answer` cannot be the answer to `batch`, when it cannot.
    fn check(&self, batch: &Batch<Self::Payload>, answer: &Self::Payload) -> Result<(), WrongAnswer>;
}

/// The answers of one call, in order.
pub(crate) type Answers<P> = BoxStream<'static, Result<P, Failure>>;

/// The gRPC door: `SolveBatchStream`, each batch sent as the bytes the reading thread
/// encoded; each answer's ids are checked against them ([`answer_check`]).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Grpc;

impl Door for Grpc {
    type Payload = Bytes;
    type Link = Channel;

    fn link<'a>(&'a self, server: &'a Server) -> BoxFuture<'a, Result<Channel, tonic::transport::Error>> {
        server.connect().boxed()
    }

    fn open(
        &self,
        channel: Channel,
        config: &ConnectionConfig,
        requests: tokio::sync::mpsc::Receiver<Bytes>,
    ) -> BoxFuture<'static, Result<Answers<Bytes>, Failure>> {
        let mut grpc = tonic::client::Grpc::new(channel)
            .max_decoding_message_size(config.max_message_bytes)
            .max_encoding_message_size(config.max_message_bytes);
        if let Some(encoding) = config.compression {
            grpc = grpc.send_compressed(encoding).accept_compressed(encoding);
        }
        async move {
            grpc.ready().await.map_err(Failure::Connect)?;
            let path = format!("/{}/{SOLVE_BATCH_STREAM}", pb::game_solver_service_server::SERVICE_NAME);
            let path = tonic::codegen::http::uri::PathAndQuery::try_from(path).expect("a valid path");
            let call = grpc.streaming(tonic::Request::new(ReceiverStream::new(requests)), path, PassThrough);
            let answers = call.await.map_err(Failure::Status)?.into_inner();
            Ok(answers.map_err(Failure::Status).boxed())
        }
        .boxed()
    }

    fn check(&self, batch: &Batch<Bytes>, answer: &Bytes) -> Result<(), WrongAnswer> {
        answer_check::check(batch, answer)
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct PassThrough;

impl Codec for PassThrough {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = PassThrough;
    type Decoder = PassThrough;

    fn encoder(&mut self) -> Self::Encoder {
        PassThrough
    }

    fn decoder(&mut self) -> Self::Decoder {
        PassThrough
    }
}

impl Encoder for PassThrough {
    type Item = Bytes;
    type Error = Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }

    fn buffer_settings(&self) -> BufferSettings {
        BufferSettings::new(256 * 1024, 1 << 20)
    }
}

impl Decoder for PassThrough {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }

    fn buffer_settings(&self) -> BufferSettings {
        BufferSettings::new(256 * 1024, 1 << 20)
    }
}
