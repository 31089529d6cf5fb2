//! The schema's field tree as arrow-ipc lays it out: each type's buffers and children,
//! the counts a schema fixes, and where its dictionaries are.

use std::collections::HashSet;

use arrow_schema::{DataType, Field, Schema, UnionMode};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Shape {
    pub(super) nodes: usize,
    pub(super) buffers: usize,
    pub(super) views: usize,
    /// Unions, which have a validity buffer more in metadata V4.
    pub(super) unions: usize,
}

/// How arrow-ipc lays out a node of a type: its buffers and its children. The one match
/// over the types: [`shape_of`] counts from it and [`Walk`](super::walk::Walk) checks by it.
pub(super) enum Layout<'a> {
    /// No buffer of its own: null.
    Empty,
    /// Validity and a bit a value: boolean.
    Bits,
    /// Validity and fixed-width values (a primitive type) or keys (a dictionary's), the
    /// type's width.
    Fixed(&'static str, &'a DataType),
    /// Validity and values of a width from the schema.
    FixedSizeBinary(i32),
    /// Validity, offsets of this width, values.
    Bytes(usize),
    /// Validity, views, then as many data buffers as the message's variadic count says.
    Views,
    /// Validity, offsets of this width, then the child.
    List(&'a Field, usize),
    /// Validity, offsets and sizes of this width, then the child.
    ListView(&'a Field, usize),
    /// Validity, then the child, of the size from the schema a value.
    FixedSizeList(&'a Field, i32),
    /// Validity, then each child.
    Struct(&'a arrow_schema::Fields),
    /// (A validity in V4,) type ids, offsets when dense, then each child.
    Union(&'a arrow_schema::UnionFields, UnionMode),
    /// No buffer: its run ends and values children.
    RunEnd(&'a Field, &'a Field),
}

pub(super) fn layout(data_type: &DataType) -> Layout<'_> {
    match data_type {
        DataType::Null => Layout::Empty,
        DataType::Boolean => Layout::Bits,
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64
        | DataType::Float16
        | DataType::Float32
        | DataType::Float64
        | DataType::Timestamp(_, _)
        | DataType::Date32
        | DataType::Date64
        | DataType::Time32(_)
        | DataType::Time64(_)
        | DataType::Duration(_)
        | DataType::Interval(_)
        | DataType::Decimal32(_, _)
        | DataType::Decimal64(_, _)
        | DataType::Decimal128(_, _)
        | DataType::Decimal256(_, _) => Layout::Fixed("values", data_type),
        DataType::Dictionary(key, _) => Layout::Fixed("keys", key),
        DataType::FixedSizeBinary(width) => Layout::FixedSizeBinary(*width),
        DataType::Binary | DataType::Utf8 => Layout::Bytes(4),
        DataType::LargeBinary | DataType::LargeUtf8 => Layout::Bytes(8),
        DataType::BinaryView | DataType::Utf8View => Layout::Views,
        DataType::List(child) | DataType::Map(child, _) => Layout::List(child, 4),
        DataType::LargeList(child) => Layout::List(child, 8),
        DataType::ListView(child) => Layout::ListView(child, 4),
        DataType::LargeListView(child) => Layout::ListView(child, 8),
        DataType::FixedSizeList(child, size) => Layout::FixedSizeList(child, *size),
        DataType::Struct(fields) => Layout::Struct(fields),
        DataType::Union(fields, mode) => Layout::Union(fields, *mode),
        DataType::RunEndEncoded(run_ends, values) => Layout::RunEnd(run_ends, values),
    }
}

/// Adds the nodes and buffers a batch holds for `data_type` to `shape`, as arrow-ipc
/// reads them.
pub(super) fn shape_of(data_type: &DataType, shape: &mut Shape) {
    shape.nodes += 1;
    let (buffers, children): (usize, Vec<&Field>) = match layout(data_type) {
        Layout::Empty => (0, vec![]),
        Layout::Bits | Layout::Fixed(_, _) | Layout::FixedSizeBinary(_) => (2, vec![]),
        Layout::Bytes(_) => (3, vec![]),
        Layout::Views => {
            shape.views += 1;
            (2, vec![])
        }
        Layout::List(child, _) => (2, vec![child]),
        Layout::ListView(child, _) => (3, vec![child]),
        Layout::FixedSizeList(child, _) => (1, vec![child]),
        Layout::Struct(fields) => (1, fields.iter().map(AsRef::as_ref).collect()),
        Layout::Union(fields, mode) => {
            shape.unions += 1;
            let buffers = match mode {
                UnionMode::Dense => 2,
                UnionMode::Sparse => 1,
            };
            (buffers, fields.iter().map(|(_, f)| f.as_ref()).collect())
        }
        Layout::RunEnd(run_ends, values) => (0, vec![run_ends, values]),
    };
    shape.buffers += buffers;
    for child in children {
        shape_of(child.data_type(), shape);
    }
}

/// The ids of the dictionaries `field`'s column reads, nested ones too.
pub(super) fn dictionary_ids(field: &Field, ids: &mut HashSet<i64>) {
    #[expect(deprecated, reason = "arrow-ipc 60 still keys dictionaries by the field's dict_id")]
    if let Some(id) = field.dict_id() {
        ids.insert(id);
    }
    for child in child_fields(field.data_type()) {
        dictionary_ids(child, ids);
    }
}

/// The fields inside `data_type`, a dictionary's values' included.
fn child_fields(data_type: &DataType) -> Vec<&Field> {
    if let DataType::Dictionary(_, values) = data_type {
        return child_fields(values);
    }
    match layout(data_type) {
        Layout::List(child, _) | Layout::ListView(child, _) | Layout::FixedSizeList(child, _) => vec![child],
        Layout::Struct(fields) => fields.iter().map(AsRef::as_ref).collect(),
        Layout::Union(fields, _) => fields.iter().map(|(_, f)| f.as_ref()).collect(),
        Layout::RunEnd(run_ends, values) => vec![run_ends, values],
        Layout::Empty
        | Layout::Bits
        | Layout::Fixed(_, _)
        | Layout::FixedSizeBinary(_)
        | Layout::Bytes(_)
        | Layout::Views => vec![],
    }
}

/// The value type of dictionary `id`: the first field of the schema with that id, as
/// arrow-ipc looks it up.
pub(super) fn dictionary_value_type(schema: &Schema, id: i64) -> Option<DataType> {
    fn find(field: &Field, id: i64) -> Option<DataType> {
        #[expect(deprecated, reason = "arrow-ipc 60 still keys dictionaries by the field's dict_id")]
        let own = field.dict_id();
        if own == Some(id) {
            if let DataType::Dictionary(_, values) = field.data_type() {
                return Some(values.as_ref().clone());
            }
        }
        child_fields(field.data_type()).into_iter().find_map(|child| find(child, id))
    }
    schema.fields().iter().find_map(|field| find(field, id))
}
