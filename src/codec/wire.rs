//! What the codec's encoder, decoder and size walk share: the keys and field numbers of
//! the contract's messages, and two walks over a message's fields (the decoder's, of the
//! one-byte keys it takes, and one of any field, as prost reads it).

use crate::games::GameKind;

/// Keys: a field number and wire type in one byte (`number << 3 | type`).
pub(super) const VARINT_1: u8 = 1 << 3;
pub(super) const LEN_1: u8 = 1 << 3 | 2;
pub(super) const VARINT_2: u8 = 2 << 3;
pub(super) const VARINT_3: u8 = 3 << 3;
pub(super) const LEN_4: u8 = 4 << 3 | 2;
pub(super) const LEN_5: u8 = 5 << 3 | 2;
pub(super) const VARINT_6: u8 = 6 << 3;

/// The field number of `kind`'s game in a `Problem`'s `oneof` (after `id`).
pub(super) const fn problem_game_field(kind: GameKind) -> usize {
    kind.index() + 2
}

/// The field number of `kind`'s move in a `Move`'s `oneof`.
pub(super) const fn move_game_field(kind: GameKind) -> usize {
    kind.index() + 1
}

/// The one-byte key of length-delimited field `number` (at most 15).
pub(super) const fn len_key(number: usize) -> u8 {
    (number as u8) << 3 | 2
}

/// The one-byte key of varint field `number` (at most 15).
pub(super) const fn varint_key(number: usize) -> u8 {
    (number as u8) << 3
}

/// The fields of a message, front to back.
pub(super) struct Fields<'a>(pub(super) &'a [u8]);

impl<'a> Fields<'a> {
    /// The next key, if there is one.
    pub(super) fn key(&mut self) -> Option<u8> {
        let (&key, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(key)
    }

    /// A varint, as prost reads it: at most 10 bytes, the tenth 0 or 1.
    #[inline]
    pub(super) fn varint(&mut self) -> Option<u64> {
        let mut value = 0;
        for (i, &byte) in self.0.iter().take(10).enumerate() {
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte < 0x80 {
                self.0 = &self.0[i + 1..];
                return (i < 9 || byte < 2).then_some(value);
            }
        }
        None
    }

    /// A length and that many bytes.
    pub(super) fn len_delimited(&mut self) -> Option<&'a [u8]> {
        let len = usize::try_from(self.varint()?).ok()?;
        let value = self.0.get(..len)?;
        self.0 = &self.0[len..];
        Some(value)
    }
}

/// A field of any message, as prost reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WireField<'a> {
    /// The field's number.
    pub(crate) number: u64,
    /// Its value.
    pub(crate) value: WireValue<'a>,
    /// Whether its key took one byte, as every key this codec's decoder takes does.
    pub(crate) short_key: bool,
}

/// A field's value: the bytes of a length-delimited one, the kind of any other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WireValue<'a> {
    /// A varint.
    Varint,
    /// 8 or 4 bytes.
    Fixed,
    /// Length-delimited: a string, bytes, a message or packed scalars.
    Len(&'a [u8]),
}

/// Why a walk over a message's fields stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WireError {
    /// Bytes prost refuses too.
    Malformed(&'static str),
    /// A group, which prost skips and this walk does not follow.
    Group,
}

/// The fields of any message, front to back: keys of any length and every wire type but
/// groups, as prost reads them.
pub(crate) struct WireFields<'a>(pub(crate) &'a [u8]);

impl<'a> WireFields<'a> {
    /// The next field; `None` at the end.
    #[inline]
    pub(crate) fn next(&mut self) -> Result<Option<WireField<'a>>, WireError> {
        if self.0.is_empty() {
            return Ok(None);
        }
        let before = self.0.len();
        let key = self.varint()?;
        let short_key = before - self.0.len() == 1;
        let number = key >> 3;
        if number == 0 || key > u64::from(u32::MAX) {
            return Err(WireError::Malformed("invalid field key"));
        }
        let value = match key & 7 {
            0 => self.varint().map(|_| WireValue::Varint)?,
            1 => self.skip(8).map(|()| WireValue::Fixed)?,
            2 => {
                let len =
                    usize::try_from(self.varint()?).map_err(|_| WireError::Malformed("length overflow"))?;
                let value = self.0.get(..len).ok_or(WireError::Malformed("a field runs past the end"))?;
                self.0 = &self.0[len..];
                WireValue::Len(value)
            }
            5 => self.skip(4).map(|()| WireValue::Fixed)?,
            3 | 4 => return Err(WireError::Group),
            _ => return Err(WireError::Malformed("invalid wire type")),
        };
        Ok(Some(WireField { number, value, short_key }))
    }

    /// A varint as prost reads it: at most 10 bytes, the tenth 0 or 1.
    #[inline]
    fn varint(&mut self) -> Result<u64, WireError> {
        // Keys, lengths and flags: almost every varint of a batch is one byte.
        if let Some((&byte, rest)) = self.0.split_first() {
            if byte < 0x80 {
                self.0 = rest;
                return Ok(u64::from(byte));
            }
        }
        let mut fields = Fields(self.0);
        let value = fields.varint().ok_or(WireError::Malformed("invalid varint"))?;
        self.0 = fields.0;
        Ok(value)
    }

    fn skip(&mut self, len: usize) -> Result<(), WireError> {
        self.0 = self.0.get(len..).ok_or(WireError::Malformed("a field runs past the end"))?;
        Ok(())
    }
}
