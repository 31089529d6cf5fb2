//! The reader against arrow's writer, and against messages it never writes.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, FixedSizeListArray, RecordBatch, StringArray, UInt64Array};
use arrow_buffer::{Buffer, MutableBuffer};
use arrow_ipc::CompressionType;
use arrow_schema::{DataType, Field, Schema};

use super::*;
use arrow_ipc::writer::{DictionaryTracker, IpcDataGenerator, IpcWriteContext, IpcWriteOptions};

const LIMIT: usize = 1 << 20;

/// `bytes` in a 64-byte aligned buffer, as a body that is not copied.
fn aligned_body(bytes: &[u8]) -> Buffer {
    let mut body = MutableBuffer::with_capacity(bytes.len());
    body.extend_from_slice(bytes);
    body.into()
}

fn stones_schema(size: i32) -> Schema {
    let item = Arc::new(Field::new("item", DataType::Int8, true));
    Schema::new(vec![Field::new("stones", DataType::FixedSizeList(item, size), true)])
}

fn n_schema() -> Schema {
    Schema::new(vec![Field::new("n", DataType::UInt64, true)])
}

/// A reader that has read `schema`'s message.
fn reader(schema: &Schema) -> IpcReader {
    let mut reader = IpcReader::new(IpcLimits::new(LIMIT));
    let decoded = reader.read(&schema_message(schema), Buffer::from(Vec::<u8>::new())).unwrap();
    assert!(matches!(decoded, Decoded::Schema(_)));
    reader
}

/// The messages arrow's writer makes of `batch`: its dictionaries', then its own.
fn written(batch: &RecordBatch, options: &IpcWriteOptions) -> Vec<(Vec<u8>, Vec<u8>)> {
    let generator = IpcDataGenerator::default();
    let mut tracker = DictionaryTracker::new(false);
    let _ = generator.schema_to_bytes_with_dictionary_tracker(batch.schema_ref(), &mut tracker, options);
    let (dictionaries, data) =
        generator.encode(batch, &mut tracker, options, &mut IpcWriteContext::default()).unwrap();
    dictionaries.into_iter().chain([data]).map(|m| (m.ipc_message, m.arrow_data)).collect()
}

fn read_all(
    reader: &mut IpcReader,
    messages: Vec<(Vec<u8>, Vec<u8>)>,
) -> Result<Option<RecordBatch>, IpcError> {
    let mut last = None;
    for (header, body) in messages {
        reader.check(&header, &body)?;
        if let Decoded::Batch(batch) = reader.read(&header, Buffer::from(body))? {
            last = Some(batch);
        }
    }
    Ok(last)
}

#[test]
fn what_arrows_writer_makes_is_read_back_with_or_without_compression() {
    let mut dictionary =
        arrow_array::builder::StringDictionaryBuilder::<arrow_array::types::Int32Type>::new();
    dictionary.extend([Some("25??"), None, Some("11")]);
    let batch = RecordBatch::try_from_iter([
        ("id", Arc::new(StringArray::from(vec![Some("a"), None, Some("c")])) as ArrayRef),
        ("num", Arc::new(dictionary.finish()) as ArrayRef),
        ("n", Arc::new(UInt64Array::from(vec![Some(1), Some(2), None])) as ArrayRef),
    ])
    .unwrap();
    for compression in [None, Some(CompressionType::LZ4_FRAME), Some(CompressionType::ZSTD)] {
        let options = IpcWriteOptions::default().try_with_compression(compression).unwrap();
        let mut reader = reader(&batch.schema());
        let read = read_all(&mut reader, written(&batch, &options)).unwrap();
        assert_eq!(read.as_ref(), Some(&batch), "{compression:?}");
        assert!(reader.dictionary_bytes() > 0);
    }
}

#[test]
fn a_row_count_no_buffer_bounds_is_held_to_the_limit() {
    let mut reader = reader(&stones_schema(0));
    let rows = 1i64 << 40;
    let raw = RawBatch {
        rows,
        nodes: vec![(rows, 0), (0, 0)],
        buffers: vec![(0, 0), (0, 0), (0, 0)],
        ..RawBatch::default()
    };
    let err = reader.check(&raw.header(0), &[]).unwrap_err();
    assert!(err.is_over_limit());
    assert_eq!(
        err.to_string(),
        format!("the record batch claims {rows} rows, above the limit of {} rows (one per 8 bytes of the message limit)", LIMIT / 8)
    );
    // Within the limit it is read, and claims its rows.
    let rows = 1000;
    let raw = RawBatch { rows, nodes: vec![(rows, 0), (0, 0)], ..raw };
    assert_eq!(reader.check(&raw.header(0), &[]).unwrap(), Claim { bytes: 0, rows: 1000, held: 0 });
    let Decoded::Batch(batch) = reader.read(&raw.header(0), Buffer::from(Vec::<u8>::new())).unwrap() else {
        panic!("a batch")
    };
    assert_eq!(batch.num_rows(), 1000);
    assert_eq!(batch.column(0).as_any().downcast_ref::<FixedSizeListArray>().unwrap().value_length(), 0);
}

#[test]
fn every_buffer_is_checked_against_the_body_and_its_node() {
    let mut reader = reader(&n_schema());
    let body = vec![0u8; 64];
    let ok = RawBatch { rows: 8, nodes: vec![(8, 0)], buffers: vec![(0, 0), (0, 64)], ..RawBatch::default() };
    assert_eq!(
        reader.check(&ok.header(64), &aligned_body(&body)).unwrap(),
        Claim { bytes: 64, rows: 8, held: 0 }
    );
    let cases: Vec<(RawBatch, i64, &str)> = vec![
        (RawBatch { buffers: vec![(0, 0), (1 << 62, 64)], ..ok.clone() }, 64,
         "buffer 1 (values of field \"n\") at offset 4611686018427387904, 64 bytes, lies outside the 64-byte body"),
        (RawBatch { buffers: vec![(0, 0), (0, -8)], ..ok.clone() }, 64,
         "buffer 1 (values of field \"n\") at offset 0, -8 bytes, lies outside the 64-byte body"),
        (RawBatch { buffers: vec![(0, 0), (8, i64::MAX)], ..ok.clone() }, 64,
         "buffer 1 (values of field \"n\") at offset 8, 9223372036854775807 bytes, lies outside the 64-byte body"),
        (RawBatch { buffers: vec![(0, 0), (0, 56)], ..ok.clone() }, 64,
         "buffer 1 (values of field \"n\") holds 56 bytes; 8 values need 64"),
        (RawBatch { nodes: vec![(8, 1)], ..ok.clone() }, 64,
         "buffer 0 (validity of field \"n\") holds 0 bytes; 8 values need 1"),
        (RawBatch { nodes: vec![(8, 9)], ..ok.clone() }, 64, "field \"n\": null count 9, outside 0..=8"),
        (RawBatch { nodes: vec![(7, 0)], ..ok.clone() }, 64, "field \"n\": length 7, but its parent has 8"),
        (RawBatch { nodes: vec![(8, 0), (8, 0)], ..ok.clone() }, 64, "the record batch has 2 field nodes; its schema needs 1"),
        (RawBatch { buffers: vec![(0, 64)], ..ok.clone() }, 64, "the record batch has 1 buffers; its schema needs 2"),
        (ok.clone(), 128, "the message declares a body of 128 bytes but carries 64"),
        (RawBatch { rows: -1, ..ok.clone() }, 64, "the record batch claims -1 rows, above the limit of 131072 rows (one per 8 bytes of the message limit)"),
    ];
    for (raw, declared, message) in cases {
        let err = reader.check(&raw.header(declared), &body).unwrap_err();
        assert_eq!(err.to_string(), message);
        // Reading checks the same, and never panics.
        assert_eq!(reader.read(&raw.header(declared), Buffer::from(body.clone())).unwrap_err(), err);
    }
    let err = reader.check(b"not a flatbuffer", &[]).unwrap_err();
    assert!(err.to_string().starts_with("the IPC message is not a valid flatbuffer: "), "{err}");
}

#[test]
fn a_compressed_buffers_claim_is_bounded_and_charged_before_it_is_inflated() {
    let mut reader = reader(&n_schema());
    let mut body = vec![0u8; 16];
    body[..8].copy_from_slice(&(1i64 << 62).to_le_bytes());
    let raw = RawBatch {
        rows: 1,
        nodes: vec![(1, 0)],
        buffers: vec![(0, 0), (0, 16)],
        compression: Some(CompressionType::LZ4_FRAME),
        ..RawBatch::default()
    };
    let err = reader.check(&raw.header(16), &body).unwrap_err();
    assert!(err.is_over_limit());
    assert_eq!(
        err.to_string(),
        "the message's compressed buffers claim 4611686018427387904 bytes inflated (the largest, buffer 1 \
         of field \"n\", 4611686018427387904), above the limit of 1048576 bytes"
    );
    assert_eq!(reader.read(&raw.header(16), Buffer::from(body.clone())).unwrap_err(), err);
    // A claim within the limit is the claim: a lie is arrow-ipc's error, after it.
    body[..8].copy_from_slice(&4096i64.to_le_bytes());
    assert_eq!(
        reader.check(&raw.header(16), &aligned_body(&body)).unwrap(),
        Claim { bytes: 16 + 4096, rows: 1, held: 0 }
    );
    assert!(matches!(reader.read(&raw.header(16), Buffer::from(body.clone())), Err(IpcError::Decode(_))));
    body[..8].copy_from_slice(&(-2i64).to_le_bytes());
    assert_eq!(
        reader.check(&raw.header(16), &body).unwrap_err().to_string(),
        "buffer 1 (values of field \"n\") is compressed but claims an uncompressed length of -2"
    );
    let short = RawBatch { buffers: vec![(0, 0), (0, 4)], ..raw };
    assert_eq!(
        reader.check(&short.header(16), &body).unwrap_err().to_string(),
        "buffer 1 (values of field \"n\") is compressed but is 4 bytes, shorter than its 8-byte length prefix"
    );
}

#[test]
fn dictionaries_are_bounded_in_number_and_bytes_deltas_included() {
    let field = |i: usize| {
        #[expect(deprecated, reason = "arrow-ipc 60 keys dictionaries by dict_id")]
        let field = Field::new_dict(
            format!("d{i}"),
            DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
            true,
            i as i64,
            false,
        );
        field
    };
    let schema = Schema::new((0..MAX_DICTIONARIES + 1).map(field).collect::<Vec<_>>());
    let mut reader = reader(&schema);
    // One value of 4,096 bytes a dictionary: offsets (8 bytes), then the value.
    let mut body = vec![0u8; 8 + 4096];
    body[4..8].copy_from_slice(&4096i32.to_le_bytes());
    let dictionary = |id: i64, delta: bool| RawBatch {
        rows: 1,
        nodes: vec![(1, 0)],
        buffers: vec![(0, 0), (0, 8), (8, 4096)],
        dictionary: Some((id, delta)),
        ..RawBatch::default()
    };
    for id in 0..MAX_DICTIONARIES as i64 {
        reader.read(&dictionary(id, false).header(body.len() as i64), aligned_body(&body)).unwrap();
    }
    assert_eq!(reader.dictionary_bytes(), MAX_DICTIONARIES * body.len());
    let err =
        reader.check(&dictionary(64, false).header(body.len() as i64), &aligned_body(&body)).unwrap_err();
    assert!(err.is_over_limit());
    assert_eq!(
        err.to_string(),
        format!("dictionary 64 would make the stream hold 65 dictionaries of {} bytes, above the limit of 64 dictionaries of 1048576 bytes", 65 * body.len())
    );
    // Deltas grow their dictionary until the bytes run out.
    let mut deltas = 0;
    let err = loop {
        match reader.read(&dictionary(0, true).header(body.len() as i64), aligned_body(&body)) {
            Ok(_) => deltas += 1,
            Err(err) => break err,
        }
    };
    assert!(matches!(err, IpcError::Dictionaries { .. }), "{err}");
    assert!(reader.dictionary_bytes() <= LIMIT, "{}", reader.dictionary_bytes());
    assert_eq!(deltas, LIMIT / body.len() - MAX_DICTIONARIES);
    let unknown =
        reader.check(&dictionary(1000, false).header(body.len() as i64), &aligned_body(&body)).unwrap_err();
    assert_eq!(unknown.to_string(), "dictionary 1000: no field of the schema has it");
}

#[test]
fn a_batch_before_its_schema_is_refused() {
    let reader = IpcReader::new(IpcLimits::new(LIMIT));
    let raw = RawBatch { rows: 0, nodes: vec![(0, 0)], buffers: vec![(0, 0), (0, 0)], ..RawBatch::default() };
    assert_eq!(
        reader.check(&raw.header(0), &[]).unwrap_err().to_string(),
        "a record batch or dictionary came before any schema"
    );
}

/// `bytes` at `shift` bytes past a 64-byte boundary, as a gRPC frame may leave a body.
fn body_at(bytes: &[u8], shift: usize) -> Buffer {
    let mut padded = MutableBuffer::with_capacity(shift + bytes.len());
    padded.extend_from_slice(&vec![0xEEu8; shift]);
    padded.extend_from_slice(bytes);
    Buffer::from(padded).slice_with_length(shift, bytes.len())
}

/// Whether `array`'s buffer `index` lies within `body` (read where it lies) or was copied.
fn lies_in(array: &ArrayRef, index: usize, body: &Buffer) -> bool {
    let data = array.to_data();
    let at = data.buffers()[index].as_ptr() as usize;
    let start = body.as_ptr() as usize;
    (start..start + body.len()).contains(&at)
}

#[test]
fn a_body_is_read_where_it_lies_and_only_the_buffers_misaligned_for_their_type_are_copied() {
    let batch = RecordBatch::try_from_iter([
        ("n", Arc::new(UInt64Array::from(vec![Some(7), None, Some(1 << 40)])) as ArrayRef),
        ("id", Arc::new(StringArray::from(vec![Some("a"), None, Some("ccc")])) as ArrayRef),
    ])
    .unwrap();
    let mut messages = written(&batch, &IpcWriteOptions::default());
    let (header, body) = messages.pop().unwrap();
    // The buffers as arrow's writer lays them out: n's validity and values, then id's
    // validity, offsets and values, each padded to 64 bytes.
    let values = 3 * 8;
    let offsets = 4 * 4;
    for shift in 0..64 {
        let mut reader = reader(&batch.schema());
        let at = body_at(&body, shift);
        let claim = reader.check(&header, &at).unwrap();
        let copied = match (shift % 8, shift % 4) {
            (0, _) => 0,
            (_, 0) => values,
            _ => values + offsets,
        };
        assert_eq!(claim, Claim { bytes: body.len() + copied, rows: 3, held: 0 }, "shift {shift}");
        let decoded = reader.read(&header, at.clone()).unwrap_or_else(|err| panic!("shift {shift}: {err}"));
        let Decoded::Batch(read) = decoded else { panic!("a batch") };
        assert_eq!(read, batch, "shift {shift}");
        assert_eq!(lies_in(read.column(0), 0, &at), shift % 8 == 0, "n's values, shift {shift}");
        assert_eq!(lies_in(read.column(1), 0, &at), shift % 4 == 0, "id's offsets, shift {shift}");
        // Bytes need no alignment: the string values are read where they lie at any shift.
        assert!(lies_in(read.column(1), 1, &at), "id's values, shift {shift}");
    }
}

#[test]
fn a_dictionary_and_compressed_buffers_at_odd_offsets_read_back_as_written() {
    let mut dictionary =
        arrow_array::builder::StringDictionaryBuilder::<arrow_array::types::Int32Type>::new();
    dictionary.extend([Some("25??"), None, Some("11"), Some("25??")]);
    let batch = RecordBatch::try_from_iter([
        ("num", Arc::new(dictionary.finish()) as ArrayRef),
        ("n", Arc::new(UInt64Array::from(vec![Some(1), Some(2), None, Some(u64::MAX)])) as ArrayRef),
    ])
    .unwrap();
    for compression in [None, Some(CompressionType::LZ4_FRAME), Some(CompressionType::ZSTD)] {
        let options = IpcWriteOptions::default().try_with_compression(compression).unwrap();
        for shift in [1, 3, 4, 8, 13, 63] {
            let mut reader = reader(&batch.schema());
            let mut last = None;
            for (header, body) in written(&batch, &options) {
                let at = body_at(&body, shift);
                let claim = reader.check(&header, &at).unwrap();
                assert!(claim.bytes >= body.len(), "{compression:?} shift {shift}: {claim:?}");
                if let Decoded::Batch(read) = reader.read(&header, at).unwrap() {
                    last = Some(read);
                }
            }
            assert_eq!(last.as_ref(), Some(&batch), "{compression:?} shift {shift}");
        }
    }
}
