//! The Arrow Flight door: record batches in, [`Solver`] in the middle, record batches out.
//!
//! `DoExchange` is the columnar twin of `SolveBatchStream`: the client streams batches of
//! problems (the first message carries the descriptor, `[game]` or `["mixed"]`, optionally
//! followed by `winner_only`), and each batch is answered by exactly one batch of
//! solutions of the same length, rows in the same order, through the same read-ahead
//! bound, window and idle timeout (`service::stream`) and the same fan-out. The columns
//! and types are [`columnar`]'s. `ListFlights`, `GetFlightInfo` and `GetSchema` describe
//! them; every other Flight method is `UNIMPLEMENTED`.
//!
//! A batch whose columns cannot be read (no game column, a wrong type) ends the exchange
//! with `INVALID_ARGUMENT`; a row that cannot be solved is answered with its error in
//! `error_reason` and `error_message`, and the others are solved. A new schema in mid-stream
//! is accepted: every batch is read on its own, and when the answers' schema changes (the
//! `id` column's type changed, or it came or went) a schema message comes before the next
//! answer.

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_buffer::Buffer;
use arrow_flight::flight_descriptor::DescriptorType;
use arrow_flight::flight_service_server::{FlightService, FlightServiceServer};
use arrow_flight::{
    Action, ActionType, Criteria, Empty, FlightData, FlightDescriptor, FlightInfo, HandshakeRequest,
    HandshakeResponse, IpcMessage, PollInfo, PutResult, SchemaAsIpc, SchemaResult, Ticket,
};
use arrow_ipc::writer::IpcWriteOptions;
use arrow_schema::{ArrowError, DataType, Field, Schema};
use futures::stream::BoxStream;
use futures::{Stream, StreamExt, TryStreamExt};
use tonic::codec::CompressionEncoding;
use tonic::{Request, Response, Status, Streaming};

use super::memory::{CallMemory, MemoryHold};
use super::stream::{solve_in_order, ResponseStream, StreamBudget};
use crate::codec::{flight_message_len, FlightCodec};
use crate::columnar::ipc::{Decoded, IpcError, IpcLimits, IpcReader};
use crate::columnar::kernels::Answered;
use crate::columnar::{self, BatchEncoder, Descriptor, DescriptorError, FlightMessage, Games};
use crate::games::{GameRef, Outcome};
use crate::pool::{self, PoolError};
use crate::problem::{Problem, ProblemError};
use crate::solver::Solver;

/// The Flight service's name, as reflection and the metrics know it.
pub const SERVICE_NAME: &str =
    <FlightServiceServer<FlightSolverService> as tonic::server::NamedService>::NAME;

/// Every method of the Flight protocol, served or not: the metrics label each by name.
pub const METHODS: [&str; 10] = [
    "Handshake",
    "ListFlights",
    "GetFlightInfo",
    "PollFlightInfo",
    "GetSchema",
    "DoGet",
    "DoPut",
    "DoExchange",
    "DoAction",
    "ListActions",
];

/// The Flight service; cheap to clone.
#[derive(Debug, Clone)]
pub struct FlightSolverService {
    solver: Arc<Solver>,
    /// The largest message the server sends (`--max-message-bytes`).
    max_message_bytes: usize,
}

impl FlightSolverService {
    /// A service over `solver` that sends no message above `max_message_bytes`.
    pub fn new(solver: Arc<Solver>, max_message_bytes: usize) -> Self {
        FlightSolverService { solver, max_message_bytes }
    }

    /// What `DoExchange` does between decoding and encoding: each batch of `requests`
    /// answered by one batch of solutions, in order, through the stream's read-ahead bound,
    /// window and idle timeout ([`solve_in_order`]) and the fan-out.
    fn exchange(
        &self,
        requests: impl Stream<Item = Result<Exchanged, Status>> + Send + 'static,
    ) -> ResponseStream<RecordBatch> {
        let solver = Arc::clone(&self.solver);
        let config = solver.config();
        let budget = StreamBudget::new(config.batch_window, config.stream_in_flight_bytes);
        let idle = config.stream_idle_timeout.0;
        let weigh = |exchanged: &Exchanged| weight(&exchanged.batch);
        solve_in_order(requests, budget, idle, weigh, move |exchanged: Exchanged| {
            let solver = Arc::clone(&solver);
            async move {
                let Exchanged { descriptor, batch, held } = exchanged;
                let answer = solve_batch(&solver, descriptor, batch).await;
                // The batch's memory is given back once it is solved and gone.
                drop(held);
                answer
            }
        })
    }

    /// An exchange from this process, without the wire: `batches` solving `descriptor`,
    /// each answered as `DoExchange` answers it (the same read-ahead bound, window, idle
    /// timeout, fan-out and counts), with no Arrow IPC, HTTP/2 or connection in between.
    /// For the bulk client's embedded server, whose only client is the process itself:
    /// the transport it skips was about half of a Parquet run's memory and a quarter of
    /// its CPU (docs/performance.md).
    pub fn exchange_in_process(
        &self,
        descriptor: Descriptor,
        batches: impl Stream<Item = RecordBatch> + Send + 'static,
    ) -> BoxStream<'static, Result<RecordBatch, Status>> {
        tracing::debug!(games = ?descriptor.games, "in-process exchange opened");
        self.exchange(batches.map(move |batch| Ok(Exchanged { descriptor, batch, held: None })))
    }
}

/// The status of a call whose method this server does not serve.
fn not_served(method: &str) -> Status {
    Status::unimplemented(format!(
        "{method} is not served: this Flight service solves tables through DoExchange, with a \
         descriptor path [game] or [game, \"winner_only\"] (game: one of {}); ListFlights, \
         GetFlightInfo and GetSchema describe their columns",
        Games::ALL.map(Games::name).join(", ")
    ))
}

/// The descriptor a Flight request names, as this server reads it: a path. Any other
/// type (a command, `UNKNOWN`, a number no type has) is refused, naming it.
fn descriptor(descriptor: Option<&FlightDescriptor>) -> Result<Descriptor, Status> {
    let invalid = |message: String| Status::invalid_argument(message);
    let descriptor = descriptor
        .ok_or_else(|| invalid(format!("no descriptor in the request: {}", DescriptorError::NoGame)))?;
    let kind = descriptor.r#type;
    match DescriptorType::try_from(kind) {
        Ok(DescriptorType::Path) => {}
        Ok(DescriptorType::Cmd) => {
            return Err(invalid(format!(
                "the descriptor is a command, not a path: {}",
                DescriptorError::NoGame
            )))
        }
        other => {
            let shown = other.map_or(kind.to_string(), |known| format!("{} ({kind})", known.as_str_name()));
            return Err(invalid(format!(
                "the descriptor's type is {shown}, not PATH: {}",
                DescriptorError::NoGame
            )));
        }
    }
    Descriptor::parse(&descriptor.path).map_err(|err| invalid(err.to_string()))
}

/// The `id` field the discovery RPCs show: utf8, though any type is echoed.
fn shown_id() -> Field {
    Field::new(columnar::ID, DataType::Utf8, true)
}

/// A schema in the IPC form of `FlightInfo.schema`.
fn ipc_schema(schema: &Schema) -> Result<bytes::Bytes, Status> {
    let options = IpcWriteOptions::default();
    IpcMessage::try_from(SchemaAsIpc::new(schema, &options)).map(|message| message.0).map_err(internal)
}

/// What `descriptor` exchanges: the input schema as the info's schema, the output schema
/// (in the same IPC form) as its `app_metadata`, and no endpoint (nothing is fetched with
/// DoGet).
fn flight_info(descriptor: Descriptor) -> Result<FlightInfo, Status> {
    let output = columnar::output_schema(descriptor.games, Some(&shown_id()));
    Ok(FlightInfo::new()
        .try_with_schema(&columnar::input_schema(descriptor.games))
        .map_err(internal)?
        .with_descriptor(FlightDescriptor::new_path(descriptor.path()))
        .with_ordered(true)
        .with_app_metadata(ipc_schema(&output)?))
}

fn internal(err: impl std::fmt::Display) -> Status {
    Status::internal(err.to_string())
}

/// The status of a message the IPC reader refused: `RESOURCE_EXHAUSTED` for its size,
/// `INVALID_ARGUMENT` for its form, naming what was wrong.
fn ipc_status(err: IpcError) -> Status {
    let message = format!("cannot read the exchange's data: {err}");
    match err.is_over_limit() {
        true => Status::resource_exhausted(message),
        false => Status::invalid_argument(message),
    }
}

/// A batch of an exchange: what it solves, its rows, and the request memory held for it
/// until it is solved (none in process).
struct Exchanged {
    descriptor: Descriptor,
    batch: RecordBatch,
    held: Option<MemoryHold>,
}

/// The widest answer row's columns (8 bytes for each move field and the nim value, two
/// string offsets): what a batch's row costs in its answer.
const ANSWER_ROW_BYTES: usize = columnar::answer_row_bytes(2);

/// What the server holds for each row of a batch while it is solved, beyond its arrays:
/// its problem and result, and its answer row. A batch's rows are charged this before it is
/// decoded, so that a row count no buffer bounds (a column of a type without buffers) is
/// bounded by the budget too.
const ROW_BYTES: usize = std::mem::size_of::<((), Problem)>()
    + std::mem::size_of::<Result<Outcome, ProblemError>>()
    + ANSWER_ROW_BYTES;

/// An exchange's request stream as it is read: its messages, the IPC reader (schema and
/// dictionaries), the descriptor of its first message, and the memory its dictionaries hold.
struct ExchangeReader {
    requests: Streaming<FlightData>,
    reader: IpcReader,
    descriptor: Option<Descriptor>,
    memory: Option<CallMemory>,
    dictionaries: Option<MemoryHold>,
}

impl ExchangeReader {
    /// The next batch, `None` at the end of the stream.
    async fn next(&mut self) -> Result<Option<Exchanged>, Status> {
        while let Some(data) = self.requests.message().await? {
            let descriptor = match self.descriptor {
                Some(descriptor) => descriptor,
                None => *self.descriptor.insert(descriptor(data.flight_descriptor.as_ref())?),
            };
            // A message without an IPC header (pyarrow sends the descriptor alone first,
            // and metadata-only messages later) carries no data.
            if data.data_header.is_empty() {
                continue;
            }
            if let Some(batch) = self.read(descriptor, data)? {
                return Ok(Some(batch));
            }
        }
        Ok(None)
    }

    /// Reads one message: checked whole, its decoded bytes and rows charged to the call,
    /// then decoded.
    fn read(&mut self, descriptor: Descriptor, data: FlightData) -> Result<Option<Exchanged>, Status> {
        let claim = self.reader.check(&data.data_header, &data.data_body).map_err(ipc_status)?;
        let cost = claim.bytes.saturating_add(claim.rows.saturating_mul(ROW_BYTES));
        let held = self.memory.as_ref().map(|memory| memory.0.hold_message(cost)).transpose()?;
        let body = Buffer::from(data.data_body);
        match self.reader.read(&data.data_header, body).map_err(ipc_status)? {
            Decoded::Batch(batch) => Ok(Some(Exchanged { descriptor, batch, held })),
            Decoded::Schema(_) | Decoded::Dictionary => {
                // The dictionaries stay charged while they are held: what they hold now,
                // in place of what they held before.
                drop(held);
                self.dictionaries = None;
                let bytes = self.reader.dictionary_bytes();
                if let (Some(memory), true) = (&self.memory, bytes > 0) {
                    self.dictionaries = Some(memory.0.hold(bytes)?);
                }
                Ok(None)
            }
        }
    }
}

/// The record batches of an exchange, each with the descriptor of its first message and
/// the memory held for it, every message read through [`IpcReader`] within `limits`.
fn batches(
    requests: Streaming<FlightData>,
    memory: Option<CallMemory>,
    limits: IpcLimits,
) -> impl Stream<Item = Result<Exchanged, Status>> + Send + 'static {
    let reader = ExchangeReader {
        requests,
        reader: IpcReader::new(limits),
        descriptor: None,
        memory,
        dictionaries: None,
    };
    futures::stream::try_unfold(reader, |mut reader| async move {
        Ok(reader.next().await?.map(|batch| (batch, reader)))
    })
}

/// The memory a batch holds while it is solved, as the read-ahead counts it: its Arrow
/// arrays and the problems decoded from them (as `SolveBatchStream` counts its decoded
/// problems). All its rows count: a run of large problems takes the rest of its batch
/// along.
fn weight(batch: &RecordBatch) -> usize {
    batch.get_array_memory_size() + batch.num_rows() * std::mem::size_of::<Problem>()
}

/// Solves one batch of problems into its batch of solutions: the column kernels first
/// ([`columnar::kernels`]), on the batch's own task when their work is within
/// `--inline-work` (a row of a batch costs about what a problem of one unit does) and on
/// the pool beyond; then the rows they leave, through the fan-out as any door's problems.
async fn solve_batch(
    solver: &Solver,
    descriptor: Descriptor,
    batch: RecordBatch,
) -> Result<RecordBatch, Status> {
    let invalid = |err: columnar::ColumnError| Status::invalid_argument(err.to_string());
    let pool_failed = |err: PoolError| Status::from(ProblemError::from(err));
    let work = batch.num_rows().max(batch.get_array_memory_size() / 8);
    let mut answered = if work <= solver.config().inline_work {
        Answered::of(&batch, descriptor, solver.tables())
    } else {
        let (tables, batch) = (Arc::clone(solver.tables()), batch.clone());
        pool::run(move |_| Answered::of(&batch, descriptor, &tables)).await.map_err(pool_failed)?
    }
    .map_err(invalid)?;
    solver.answered(&answered.counts());
    let rows: Vec<usize> = answered.fallback().collect();
    if !rows.is_empty() {
        let problems = columnar::BatchProblems::of(&batch, descriptor.games).map_err(invalid)?;
        let run: Vec<_> = rows.iter().map(|&row| problems.get(row)).collect();
        let results = if solver.solves_inline(&run) {
            let mut results = Vec::with_capacity(run.len());
            solver.solve_borrowed(&run, descriptor.winner_only, &mut results).await;
            results
        } else {
            // Larger problems go to the pool, which splits them over every core and needs
            // them owned.
            let owned = run.into_iter().map(|problem| ((), problem.map(GameRef::to_owned))).collect();
            solver
                .solve_batch(owned, descriptor.winner_only, |(), result| result)
                .await
                .map_err(pool_failed)?
        };
        answered.fill(results);
    }
    answered.finish(&batch).map_err(internal)
}

/// Turns answer batches into Flight messages ([`BatchEncoder`]), none above the
/// message limit.
struct AnswerEncoder {
    encoder: BatchEncoder,
    max_message_bytes: usize,
}

impl AnswerEncoder {
    fn new(max_message_bytes: usize) -> Self {
        AnswerEncoder { encoder: BatchEncoder::default(), max_message_bytes }
    }

    /// The messages that carry `batch`, never splitting it: one batch answers one batch.
    fn encode(&mut self, batch: &RecordBatch) -> Result<Vec<FlightMessage>, Status> {
        let messages = self
            .encoder
            .messages(batch)
            .map_err(|err: ArrowError| internal(format!("cannot encode the answer: {err}")))?;
        // Checked here rather than by tonic's encoder, whose OUT_OF_RANGE says less.
        if let Some(large) = messages.iter().map(flight_message_len).find(|&len| len > self.max_message_bytes)
        {
            return Err(Status::resource_exhausted(format!(
                "the answer to a batch of {} rows is {large} bytes, above the limit of {} bytes: send smaller batches",
                batch.num_rows(),
                self.max_message_bytes
            )));
        }
        Ok(messages)
    }
}

impl FlightSolverService {
    /// `DoExchange`'s answers as the messages that carry them, their bodies in pieces:
    /// [`FlightServer`] writes them with [`FlightCodec`], and the trait's `do_exchange`
    /// (for a plain `FlightServiceServer`) as `FlightData`.
    fn exchange_messages(
        &self,
        request: Request<Streaming<FlightData>>,
    ) -> BoxStream<'static, Result<FlightMessage, Status>> {
        tracing::debug!(remote = ?request.remote_addr(), "DoExchange opened");
        let memory = request.extensions().get::<CallMemory>().cloned();
        let limits = IpcLimits::new(self.max_message_bytes);
        let answers = self.exchange(batches(request.into_inner(), memory, limits));
        let mut encoder = AnswerEncoder::new(self.max_message_bytes);
        answers
            .map(move |answer| answer.and_then(|batch| encoder.encode(&batch)))
            .flat_map(|messages| match messages {
                Ok(messages) => futures::stream::iter(messages.into_iter().map(Ok)).left_stream(),
                Err(status) => futures::stream::once(futures::future::ready(Err(status))).right_stream(),
            })
            .boxed()
    }
}

/// The Flight service as the server routes it: `DoExchange` through [`FlightCodec`], whose
/// answers' bodies are copied once, into the gRPC frame; every other method through
/// arrow-flight's generated server. Both with the same message limit and compression.
#[derive(Debug, Clone)]
pub struct FlightServer {
    service: FlightSolverService,
    generated: FlightServiceServer<FlightSolverService>,
    max_message_bytes: usize,
    compress_responses: bool,
}

/// The path of `DoExchange`, as clients call it.
const DO_EXCHANGE_PATH: &str = "/arrow.flight.protocol.FlightService/DoExchange";

/// The encodings a request may come in, and (when responses are compressed) an answer
/// may go out in, in the server's order of preference.
const COMPRESSIONS: [CompressionEncoding; 2] = [CompressionEncoding::Zstd, CompressionEncoding::Gzip];

impl FlightServer {
    /// `service` with messages up to `max_message_bytes` each way, requests compressed
    /// or not, and answers compressed when `compress_responses` is set and the client
    /// accepts it.
    pub fn new(service: FlightSolverService, max_message_bytes: usize, compress_responses: bool) -> Self {
        let mut generated = FlightServiceServer::new(service.clone())
            .max_decoding_message_size(max_message_bytes)
            .max_encoding_message_size(max_message_bytes);
        for encoding in COMPRESSIONS {
            generated = generated.accept_compressed(encoding);
            if compress_responses {
                generated = generated.send_compressed(encoding);
            }
        }
        FlightServer { service, generated, max_message_bytes, compress_responses }
    }

    /// `DoExchange`, served as the generated server would, with [`FlightCodec`].
    fn do_exchange<B>(&self, request: http::Request<B>) -> BoxFuture<http::Response<tonic::body::Body>>
    where
        B: http_body::Body + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>> + Send + 'static,
    {
        let mut grpc = tonic::server::Grpc::new(FlightCodec)
            .max_decoding_message_size(self.max_message_bytes)
            .max_encoding_message_size(self.max_message_bytes);
        for encoding in COMPRESSIONS {
            grpc = grpc.accept_compressed(encoding);
            if self.compress_responses {
                grpc = grpc.send_compressed(encoding);
            }
        }
        let method = ExchangeMethod(self.service.clone());
        Box::pin(async move { grpc.streaming(method, request).await })
    }
}

type BoxFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'static>>;

/// `DoExchange` as tonic's server calls a streaming method.
struct ExchangeMethod(FlightSolverService);

impl tonic::server::StreamingService<FlightData> for ExchangeMethod {
    type Response = FlightMessage;
    type ResponseStream = BoxStream<'static, Result<FlightMessage, Status>>;
    type Future = futures::future::Ready<Result<Response<Self::ResponseStream>, Status>>;

    fn call(&mut self, request: Request<Streaming<FlightData>>) -> Self::Future {
        futures::future::ready(Ok(Response::new(self.0.exchange_messages(request))))
    }
}

impl<B> tower::Service<http::Request<B>> for FlightServer
where
    B: http_body::Body + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = BoxFuture<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        if request.uri().path() == DO_EXCHANGE_PATH {
            let answer = self.do_exchange(request);
            return Box::pin(async move { Ok(answer.await) });
        }
        self.generated.call(request)
    }
}

impl tonic::server::NamedService for FlightServer {
    const NAME: &'static str = SERVICE_NAME;
}

#[tonic::async_trait]
impl FlightService for FlightSolverService {
    type HandshakeStream = ResponseStream<HandshakeResponse>;

    async fn handshake(
        &self,
        _request: Request<Streaming<HandshakeRequest>>,
    ) -> Result<Response<Self::HandshakeStream>, Status> {
        Err(not_served("Handshake"))
    }

    type ListFlightsStream = ResponseStream<FlightInfo>;

    async fn list_flights(
        &self,
        _request: Request<Criteria>,
    ) -> Result<Response<Self::ListFlightsStream>, Status> {
        let infos: Vec<_> = Games::ALL
            .into_iter()
            .map(|games| flight_info(Descriptor { games, winner_only: false }))
            .collect();
        Ok(Response::new(Box::pin(futures::stream::iter(infos))))
    }

    async fn get_flight_info(
        &self,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        Ok(Response::new(flight_info(descriptor(Some(request.get_ref()))?)?))
    }

    async fn poll_flight_info(
        &self,
        _request: Request<FlightDescriptor>,
    ) -> Result<Response<PollInfo>, Status> {
        Err(not_served("PollFlightInfo"))
    }

    async fn get_schema(&self, request: Request<FlightDescriptor>) -> Result<Response<SchemaResult>, Status> {
        let descriptor = descriptor(Some(request.get_ref()))?;
        let schema = ipc_schema(&columnar::input_schema(descriptor.games))?;
        Ok(Response::new(SchemaResult { schema }))
    }

    type DoGetStream = ResponseStream<FlightData>;

    async fn do_get(&self, _request: Request<Ticket>) -> Result<Response<Self::DoGetStream>, Status> {
        Err(not_served("DoGet"))
    }

    type DoPutStream = ResponseStream<PutResult>;

    async fn do_put(
        &self,
        _request: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoPutStream>, Status> {
        Err(not_served("DoPut"))
    }

    type DoExchangeStream = ResponseStream<FlightData>;

    async fn do_exchange(
        &self,
        request: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoExchangeStream>, Status> {
        let messages = self.exchange_messages(request);
        Ok(Response::new(Box::pin(messages.map_ok(FlightMessage::into_flight_data))))
    }

    type DoActionStream = ResponseStream<arrow_flight::Result>;

    async fn do_action(&self, _request: Request<Action>) -> Result<Response<Self::DoActionStream>, Status> {
        Err(not_served("DoAction"))
    }

    type ListActionsStream = ResponseStream<ActionType>;

    async fn list_actions(
        &self,
        _request: Request<Empty>,
    ) -> Result<Response<Self::ListActionsStream>, Status> {
        Ok(Response::new(Box::pin(futures::stream::empty())))
    }
}
