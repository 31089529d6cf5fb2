//! Hostile Arrow IPC messages against the Flight door, each with its exact bytes: every
//! one is refused with its status and message, from an attacker's address (127.0.0.2 and
//! up), and a bystander on 127.0.0.1 is answered after it. Before the IPC reader, these
//! aborted the server (an LZ4 claim of 2^62 bytes), reset the stream with a panic (an
//! offset of 2^62, a negative length, a body shorter than its buffers), or were decoded
//! outside every budget (a row count no buffer bounds, a zstd bomb, dictionaries that
//! accumulate).

use crate::common;

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, UInt64Array};
use arrow_flight::flight_service_client::FlightServiceClient;
use arrow_flight::{FlightData, FlightDescriptor};
use arrow_ipc::CompressionType;
use arrow_schema::{DataType, Field, Schema};
use common::{limits, TestServer};
use futures::TryStreamExt;
use gamesolver::columnar::ipc::{schema_message, RawBatch};
use gamesolver::server::ServerConfig;
use tonic::{Code, Status};

/// The default `--max-message-bytes`, and the rows a batch may claim under it.
const LIMIT: usize = 64 << 20;
const ROWS: usize = LIMIT / 8;

fn n_schema() -> Schema {
    Schema::new(vec![Field::new("n", DataType::UInt64, true)])
}

/// `stones: fixed_size_list<int8, size>`: of size 0, a column without buffers.
fn stones_schema(size: i32) -> Schema {
    let item = Arc::new(Field::new("item", DataType::Int8, true));
    Schema::new(vec![Field::new("stones", DataType::FixedSizeList(item, size), true)])
}

/// A string dictionary column a dictionary id, `columns` of them.
fn dictionary_schema(columns: i64) -> Schema {
    let field = |id: i64| {
        let values = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
        #[expect(deprecated, reason = "arrow-ipc 60 keys dictionaries by the field's dict_id")]
        let field = Field::new_dict(format!("d{id}"), values, true, id, false);
        field
    };
    Schema::new((0..columns).map(field).collect::<Vec<_>>())
}

/// A Flight message of a raw IPC header and body.
fn data(header: Vec<u8>, body: Vec<u8>) -> FlightData {
    FlightData { data_header: header.into(), data_body: body.into(), ..FlightData::default() }
}

/// Sends an exchange of `schema` then `messages` under `[game]` from `ip`, and returns
/// the status it ends with (it must fail).
async fn attack(
    server: &TestServer,
    ip: [u8; 4],
    game: &str,
    schema: &Schema,
    messages: Vec<FlightData>,
) -> Status {
    let mut client = FlightServiceClient::new(server.channel_from(ip).await)
        .max_decoding_message_size(usize::MAX)
        .max_encoding_message_size(usize::MAX);
    let mut first = data(schema_message(schema), Vec::new());
    first.flight_descriptor = Some(FlightDescriptor::new_path(vec![game.into()]));
    let requests = futures::stream::iter(std::iter::once(first).chain(messages));
    match client.do_exchange(requests).await {
        Err(status) => status,
        Ok(answers) => {
            answers.into_inner().try_collect::<Vec<_>>().await.expect_err("the exchange must fail")
        }
    }
}

/// A bystander on 127.0.0.1: a Solve and an exchange, both answered.
async fn bystander(server: &TestServer) {
    let solution = common::solve(&mut server.client().await, common::iv("b", 7)).await.unwrap();
    assert!(!solution.alice_wins, "7 stones: Bob wins");
    let channel = server.channel().await;
    let mut client = arrow_flight::FlightClient::new(channel);
    let n: ArrayRef = Arc::new(UInt64Array::from(vec![1, 2, 7]));
    let batch = RecordBatch::try_from_iter([("n", n)]).unwrap();
    let messages = arrow_flight::encode::FlightDataEncoderBuilder::new()
        .with_flight_descriptor(Some(FlightDescriptor::new_path(vec!["stone_game_iv".into()])))
        .build(futures::stream::iter([Ok(batch)]));
    let answers: Vec<RecordBatch> = client.do_exchange(messages).await.unwrap().try_collect().await.unwrap();
    assert_eq!(answers.iter().map(RecordBatch::num_rows).sum::<usize>(), 3);
}

fn assert_status(status: &Status, code: Code, message: &str) {
    assert_eq!((status.code(), status.message()), (code, message), "{status:?}");
}

/// One `n` batch of `rows` rows whose values buffer is `values` (offset, length) in a body
/// of `body` bytes that declares `declared`.
fn n_batch(rows: i64, values: (i64, i64), body: usize, declared: i64) -> FlightData {
    let raw = RawBatch { rows, nodes: vec![(rows, 0)], buffers: vec![(0, 0), values], ..RawBatch::default() };
    data(raw.header(declared), vec![0; body])
}

#[tokio::test]
async fn an_lz4_buffer_claiming_2_62_bytes_is_refused_before_it_is_inflated() {
    let server = TestServer::start(ServerConfig::default()).await;
    // The claim, then the start of an LZ4 frame (magic number) that never gets read.
    let mut body = (1i64 << 62).to_le_bytes().to_vec();
    body.extend([0x04, 0x22, 0x4d, 0x18, 0x60, 0x40, 0x82, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    for (ip, codec) in [([127, 0, 0, 2], CompressionType::LZ4_FRAME), ([127, 0, 0, 3], CompressionType::ZSTD)]
    {
        let raw = RawBatch {
            rows: 1,
            nodes: vec![(1, 0)],
            buffers: vec![(0, 0), (0, body.len() as i64)],
            compression: Some(codec),
            ..RawBatch::default()
        };
        let status =
            attack(&server, ip, "stone_game_iv", &n_schema(), vec![data(raw.header(24), body.clone())]).await;
        assert_status(
            &status,
            Code::ResourceExhausted,
            "cannot read the exchange's data: the message's compressed buffers claim 4611686018427387904 bytes \
             inflated (the largest, buffer 1 of field \"n\", 4611686018427387904), above the limit of 67108864 bytes",
        );
    }
    bystander(&server).await;
}

#[tokio::test]
async fn a_zstd_bomb_is_refused_by_its_claim_and_a_claim_within_the_limit_is_charged() {
    use std::io::Write;
    let server = TestServer::start(limits(|limits| limits.max_request_bytes_per_peer = Some(4 << 20))).await;
    // 1 GiB of zero-valued u64s (2^27 of them, above the row limit too), zstd-framed.
    let bomb = |bytes: u64| {
        let mut encoder = zstd::stream::Encoder::new(Vec::new(), 1).unwrap();
        let chunk = vec![0u8; 1 << 20];
        for _ in 0..bytes >> 20 {
            encoder.write_all(&chunk).unwrap();
        }
        let mut body = bytes.to_le_bytes().to_vec();
        body.extend(encoder.finish().unwrap());
        body.resize(body.len().next_multiple_of(8), 0);
        body
    };
    let message = |rows: i64, body: &[u8]| {
        let raw = RawBatch {
            rows,
            nodes: vec![(rows, 0)],
            buffers: vec![(0, 0), (0, body.len() as i64)],
            compression: Some(CompressionType::ZSTD),
            ..RawBatch::default()
        };
        data(raw.header(body.len() as i64), body.to_vec())
    };
    let body = bomb(1 << 30);
    assert!(body.len() < 64 << 10, "{} bytes", body.len());
    let rows = ROWS as i64;
    let status =
        attack(&server, [127, 0, 0, 2], "stone_game_iv", &n_schema(), vec![message(rows, &body)]).await;
    assert_status(
        &status,
        Code::ResourceExhausted,
        "cannot read the exchange's data: the message's compressed buffers claim 1073741824 bytes inflated (the \
         largest, buffer 1 of field \"n\", 1073741824), above the limit of 67108864 bytes",
    );
    // 16 MiB within the message limit, past the 4 MiB this client may hold: refused before
    // it is inflated.
    let body = bomb(16 << 20);
    let status =
        attack(&server, [127, 0, 0, 3], "stone_game_iv", &n_schema(), vec![message(2 << 20, &body)]).await;
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(
        status.message().starts_with("request message decodes to ")
            && status
                .message()
                .ends_with(" bytes, past the 4194304 bytes of request memory one client may hold"),
        "{}",
        status.message()
    );
    bystander(&server).await;
}

#[tokio::test]
async fn a_row_count_no_buffer_bounds_is_refused_past_the_limit_and_charged_below_it() {
    let server = TestServer::start(ServerConfig::default()).await;
    for (ip, rows) in [([127, 0, 0, 2], 1i64 << 24), ([127, 0, 0, 3], 1 << 26), ([127, 0, 0, 4], 1 << 40)] {
        let raw = RawBatch {
            rows,
            nodes: vec![(rows, 0), (0, 0)],
            buffers: vec![(0, 0); 3],
            ..RawBatch::default()
        };
        let status =
            attack(&server, ip, "stone_game_ix", &stones_schema(0), vec![data(raw.header(0), vec![])]).await;
        assert_status(
            &status,
            Code::ResourceExhausted,
            &format!(
                "cannot read the exchange's data: the record batch claims {rows} rows, above the limit of {ROWS} rows \
                 (one per 8 bytes of the message limit)"
            ),
        );
    }
    // At the limit, its rows are what it costs: more than one client may hold.
    let rows = ROWS as i64;
    let raw =
        RawBatch { rows, nodes: vec![(rows, 0), (0, 0)], buffers: vec![(0, 0); 3], ..RawBatch::default() };
    let status = attack(
        &server,
        [127, 0, 0, 5],
        "stone_game_ix",
        &stones_schema(0),
        vec![data(raw.header(0), vec![])],
    )
    .await;
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(
        status.message().starts_with("request message decodes to ")
            && status
                .message()
                .ends_with(" bytes, past the 268435456 bytes of request memory one client may hold"),
        "{}",
        status.message()
    );
    bystander(&server).await;
}

#[tokio::test]
async fn malformed_buffers_are_invalid_argument_naming_the_buffer_not_a_reset_stream() {
    let server = TestServer::start(ServerConfig::default()).await;
    let cases = [
        (n_batch(8, (0, 64), 16, 16), "buffer 1 (values of field \"n\") at offset 0, 64 bytes, lies outside the 16-byte body"),
        (
            n_batch(8, (1 << 62, 64), 64, 64),
            "buffer 1 (values of field \"n\") at offset 4611686018427387904, 64 bytes, lies outside the 64-byte body",
        ),
        (n_batch(8, (0, -64), 64, 64), "buffer 1 (values of field \"n\") at offset 0, -64 bytes, lies outside the 64-byte body"),
        (n_batch(8, (0, 32), 64, 64), "buffer 1 (values of field \"n\") holds 32 bytes; 8 values need 64"),
        (n_batch(8, (0, 64), 16, 64), "the message declares a body of 64 bytes but carries 16"),
        (data(b"\x10\0\0\0garbage".to_vec(), vec![]), "the IPC message is not a valid flatbuffer: "),
    ];
    for (i, (message, expected)) in cases.into_iter().enumerate() {
        let ip = [127, 0, 0, 2 + i as u8];
        let status = attack(&server, ip, "stone_game_iv", &n_schema(), vec![message]).await;
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
        let prefix = format!("cannot read the exchange's data: {expected}");
        assert!(status.message().starts_with(&prefix), "{}", status.message());
    }
    // A batch before any schema.
    let mut client = FlightServiceClient::new(server.channel_from([127, 0, 0, 9]).await);
    let mut first = n_batch(1, (0, 8), 8, 8);
    first.flight_descriptor = Some(FlightDescriptor::new_path(vec!["stone_game_iv".into()]));
    let answers = client.do_exchange(futures::stream::iter([first])).await.unwrap().into_inner();
    let status = answers.try_collect::<Vec<_>>().await.unwrap_err();
    assert_status(
        &status,
        Code::InvalidArgument,
        "cannot read the exchange's data: a record batch or dictionary came before any schema",
    );
    bystander(&server).await;
}

#[tokio::test]
async fn dictionaries_are_bounded_per_exchange_in_bytes_deltas_included_and_in_number() {
    // 1 MiB messages: an exchange holds 1 MiB of dictionaries at most.
    let server = TestServer::start(limits(|limits| limits.max_message_bytes = 1 << 20)).await;
    // One value of 300,000 bytes: offsets, then the value.
    let value = 300_000usize;
    let mut body = vec![0u8; 8 + value];
    body[4..8].copy_from_slice(&(value as i32).to_le_bytes());
    let dictionary = |id: i64, delta: bool| {
        let raw = RawBatch {
            rows: 1,
            nodes: vec![(1, 0)],
            buffers: vec![(0, 0), (0, 8), (8, value as i64)],
            dictionary: Some((id, delta)),
            ..RawBatch::default()
        };
        data(raw.header(body.len() as i64), body.clone())
    };
    // `held` bodies, and the copy of each one's offsets when they lie where a 4-byte offset
    // may not (the body lies wherever the gRPC frame put it; arrow-ipc copies those 8 bytes).
    let assert_refused = |status: &Status, count: usize, held: usize| {
        let dictionary = if count == 1 { 0 } else { count as i64 - 1 };
        let head = format!(
            "cannot read the exchange's data: dictionary {dictionary} would make the stream hold {count} dictionaries of "
        );
        let tail = " bytes, above the limit of 64 dictionaries of 1048576 bytes";
        assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
        let bytes = status.message().strip_prefix(&head).and_then(|rest| rest.strip_suffix(tail));
        let bytes: usize = bytes.and_then(|bytes| bytes.parse().ok()).unwrap_or_else(|| panic!("{status:?}"));
        assert!((held * body.len()..=held * (body.len() + 8)).contains(&bytes), "{status:?}");
    };
    // Deltas accumulate in one dictionary: the fourth is refused.
    let deltas = std::iter::once(dictionary(0, false)).chain((0..20).map(|_| dictionary(0, true))).collect();
    let status = attack(&server, [127, 0, 0, 2], "sum_game", &dictionary_schema(1), deltas).await;
    assert_refused(&status, 1, 4);
    // Forty dictionary columns: the fourth is refused.
    let columns = (0..40).map(|id| dictionary(id, false)).collect();
    let status = attack(&server, [127, 0, 0, 3], "sum_game", &dictionary_schema(40), columns).await;
    assert_refused(&status, 4, 4);
    // Sixty-five empty dictionaries: the sixty-fifth is refused.
    let empty = |id: i64| {
        let raw = RawBatch {
            rows: 0,
            nodes: vec![(0, 0)],
            buffers: vec![(0, 0), (0, 0), (0, 0)],
            dictionary: Some((id, false)),
            ..RawBatch::default()
        };
        data(raw.header(0), vec![])
    };
    let status =
        attack(&server, [127, 0, 0, 4], "sum_game", &dictionary_schema(65), (0..65).map(empty).collect())
            .await;
    assert_status(
        &status,
        Code::ResourceExhausted,
        "cannot read the exchange's data: dictionary 64 would make the stream hold 65 dictionaries of 0 bytes, above \
         the limit of 64 dictionaries of 1048576 bytes",
    );
    bystander(&server).await;
}
