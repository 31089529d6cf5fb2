//! The Flight door: a table's batches through Arrow Flight `DoExchange`, each answered by
//! one table of solutions of the same rows in the same order. With the embedded server the
//! exchange is opened on the server's [`Exchange`] in this process, without a channel: the
//! batches go to it as they are, and their answers are checked the same way.
//!
//! The exchange's descriptor names what it solves (`["mixed"]` or one game, and
//! `winner_only`), as the columnar contract says. Every answer is checked against its
//! request before it leaves the connection's window: its row count, its columns and their
//! types, and its ids, which must be the ones sent (the row numbers, when the table has no
//! id). An answer that fails is the server's fault: its batch goes to another server and
//! the server is not asked again.

use arrow_array::RecordBatch;
use arrow_flight::error::FlightError;
use arrow_flight::flight_service_client::FlightServiceClient;
use arrow_flight::{FlightClient, FlightDescriptor};
use arrow_schema::{Field, Schema};
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt, TryFutureExt, TryStreamExt};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;

use crate::client::answer_check::WrongAnswer;
use crate::client::batch::Batch;
use crate::client::connection::{Answers, ConnectionConfig, Door, Failure, Server};
use crate::client::embedded::Exchange;
use crate::client::table::answers;
use crate::columnar::{self, BatchEncoder, Descriptor};

/// Exchanges of one table's batches.
#[derive(Debug, Clone)]
pub(crate) struct Flight {
    descriptor: Descriptor,
    /// What every answer holds: the contract's table of solutions of `descriptor`'s games,
    /// with the id as it is sent.
    expected: Schema,
}

impl Flight {
    /// The door for batches whose `id` column (the first) is `id`, solving `descriptor`.
    pub(crate) fn new(descriptor: Descriptor, id: &Field) -> Self {
        let id = Field::new(columnar::ID, id.data_type().clone(), true);
        Flight { descriptor, expected: columnar::output_schema(descriptor.games, Some(&id)) }
    }
}

/// A Flight error as the failure of an attempt: a status is the server's word (retried or
/// not by its code), anything else an answer that does not decode.
fn failure(err: FlightError) -> Failure {
    match err {
        FlightError::Tonic(status) => Failure::Status(*status),
        err => Failure::Malformed(format!("it does not decode: {err}")),
    }
}

/// What an exchange is opened on.
pub(crate) enum Link {
    /// A channel to the server, over its socket or pipe.
    Channel(Channel),
    /// The embedded server's exchange, without a connection.
    InProcess(Exchange),
}

impl Door for Flight {
    type Payload = RecordBatch;
    type Link = Link;

    fn link<'a>(&'a self, server: &'a Server) -> BoxFuture<'a, Result<Link, tonic::transport::Error>> {
        match server.exchange() {
            Some(exchange) => futures::future::ready(Ok(Link::InProcess(exchange.clone()))).boxed(),
            None => server.connect().map_ok(Link::Channel).boxed(),
        }
    }

    fn open(
        &self,
        link: Link,
        config: &ConnectionConfig,
        requests: tokio::sync::mpsc::Receiver<RecordBatch>,
    ) -> BoxFuture<'static, Result<Answers<RecordBatch>, Failure>> {
        let channel = match link {
            Link::Channel(channel) => channel,
            Link::InProcess(exchange) => {
                let answers = exchange.open(self.descriptor, ReceiverStream::new(requests).boxed());
                return futures::future::ready(Ok(answers.map_err(Failure::Status).boxed())).boxed();
            }
        };
        let mut inner = FlightServiceClient::new(channel)
            .max_decoding_message_size(config.max_message_bytes)
            .max_encoding_message_size(config.max_message_bytes);
        if let Some(encoding) = config.compression {
            inner = inner.send_compressed(encoding).accept_compressed(encoding);
        }
        let mut client = FlightClient::new_from_inner(inner);
        let descriptor = FlightDescriptor::new_path(self.descriptor.path());
        async move {
            // One message a batch: the server answers each message it gets with one table,
            // so a batch is never split (the reader bounds its size).
            let mut encoder = BatchEncoder::default();
            let mut descriptor = Some(descriptor);
            let data = ReceiverStream::new(requests).flat_map(move |batch| {
                let mut messages = match encoder.encode(&batch) {
                    Ok(messages) => messages,
                    Err(err) => return futures::stream::iter(vec![Err(FlightError::Arrow(err))]),
                };
                if let Some(descriptor) = descriptor.take() {
                    messages[0].flight_descriptor = Some(descriptor);
                }
                futures::stream::iter(messages.into_iter().map(Ok).collect::<Vec<_>>())
            });
            let answers = client.do_exchange(data).await.map_err(failure)?;
            Ok(answers.map_err(failure).boxed())
        }
        .boxed()
    }

    fn check(&self, batch: &Batch<RecordBatch>, answer: &RecordBatch) -> Result<(), WrongAnswer> {
        answers::check(&batch.payload, answer, &self.expected)
            .map_err(|reason| WrongAnswer::Table { seq: batch.seq, reason })
    }
}
