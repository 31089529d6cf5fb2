//! Problem JSON straight to protobuf bytes, with the generated pbjson code as the reference.
//!
//! Parsing is the client's bottleneck, and pbjson reads every 64-bit number through serde's
//! untagged-enum machinery: it buffers the value, tries it as a string, and builds and
//! formats an error before taking it as a number. That alone was about a third of the
//! reading thread. This module reads the common shapes directly (borrowing strings, no
//! `pb::Problem` in between) and gives up on anything unusual; the caller then asks pbjson.
//! So pbjson still defines the language: this path accepts a subset of it and must encode
//! exactly what pbjson's parse would, which the tests check case by case.

use std::borrow::Cow;
use std::fmt;

use prost::bytes::{BufMut, BytesMut};
use prost::encoding::{encode_varint, encoded_len_varint};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// A problem read by the fast path; Stone Game IX stones are in the caller's scratch.
#[derive(Debug, PartialEq, Eq)]
pub struct FastProblem<'a> {
    /// The id, empty when absent.
    pub id: Cow<'a, str>,
    /// The game; `None` when no game field was present.
    pub game: Option<FastGame<'a>>,
}

/// The game of a [`FastProblem`].
#[derive(Debug, PartialEq, Eq)]
pub enum FastGame<'a> {
    /// Sum Game string.
    Sum(Cow<'a, str>),
    /// Stone Game IX; the stones are in the scratch vector.
    Ix,
    /// Stone Game IV pile.
    Iv(u64),
}

/// Reads `line` if it has a plain shape; `None` means "ask pbjson". `stones` is cleared
/// and receives the Stone Game IX stones.
pub fn parse<'a>(line: &'a [u8], stones: &mut Vec<u64>) -> Option<FastProblem<'a>> {
    stones.clear();
    let mut de = serde_json::Deserializer::from_slice(line);
    let problem = de.deserialize_map(ProblemVisitor { stones }).ok()?;
    de.end().ok()?;
    Some(problem)
}

/// Appends `problem` (with `id` in place of its own) as one `ProblemBatch.problems` entry.
pub fn encode_batch_entry(id: &str, game: &FastGame<'_>, stones: &[u64], dst: &mut BytesMut) {
    let game_body_len = match game {
        FastGame::Sum(num) => len_field(num.len()),
        FastGame::Ix => {
            if stones.is_empty() {
                0
            } else {
                len_field(stones.iter().map(|&s| encoded_len_varint(s)).sum())
            }
        }
        FastGame::Iv(0) => 0,
        FastGame::Iv(n) => 1 + encoded_len_varint(*n),
    };
    // A oneof member is written even when its message is empty.
    let problem_len = len_field(id.len()) + 1 + encoded_len_varint(game_body_len as u64) + game_body_len;
    dst.reserve(1 + encoded_len_varint(problem_len as u64) + problem_len);
    dst.put_u8(0x0a); // ProblemBatch.problems = 1, length-delimited
    encode_varint(problem_len as u64, dst);
    if !id.is_empty() {
        put_bytes(0x0a, id.as_bytes(), dst); // Problem.id = 1
    }
    match game {
        FastGame::Sum(num) => {
            dst.put_u8(0x12); // Problem.sum_game = 2
            encode_varint(game_body_len as u64, dst);
            if !num.is_empty() {
                put_bytes(0x0a, num.as_bytes(), dst); // SumGame.num = 1
            }
        }
        FastGame::Ix => {
            dst.put_u8(0x1a); // Problem.stone_game_ix = 3
            encode_varint(game_body_len as u64, dst);
            if !stones.is_empty() {
                dst.put_u8(0x0a); // StoneGameIx.stones = 1, packed
                encode_varint(stones.iter().map(|&s| encoded_len_varint(s)).sum::<usize>() as u64, dst);
                for &stone in stones {
                    encode_varint(stone, dst);
                }
            }
        }
        FastGame::Iv(n) => {
            dst.put_u8(0x22); // Problem.stone_game_iv = 4
            encode_varint(game_body_len as u64, dst);
            if *n != 0 {
                dst.put_u8(0x08); // StoneGameIv.n = 1, varint
                encode_varint(*n, dst);
            }
        }
    }
}

/// Encoded size of a length-delimited field holding `len` bytes, or 0 when empty (proto3
/// omits empty strings and packed fields).
fn len_field(len: usize) -> usize {
    if len == 0 {
        0
    } else {
        1 + encoded_len_varint(len as u64) + len
    }
}

fn put_bytes(key: u8, bytes: &[u8], dst: &mut BytesMut) {
    dst.put_u8(key);
    encode_varint(bytes.len() as u64, dst);
    dst.put_slice(bytes);
}

/// Any error: the fast path only needs to know that it should give up.
#[derive(Debug)]
struct GiveUp;

impl fmt::Display for GiveUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not a plain problem")
    }
}

impl std::error::Error for GiveUp {}

/// Field names as pbjson accepts them (JSON name and proto name), with their field ids.
const PROBLEM_FIELDS: &[(&str, u8)] = &[
    ("id", 1),
    ("sumGame", 2),
    ("sum_game", 2),
    ("stoneGameIx", 3),
    ("stone_game_ix", 3),
    ("stoneGameIv", 4),
    ("stone_game_iv", 4),
];
const SUM_GAME_FIELDS: &[(&str, u8)] = &[("num", 1)];
const STONE_GAME_IX_FIELDS: &[(&str, u8)] = &[("stones", 1)];
const STONE_GAME_IV_FIELDS: &[(&str, u8)] = &[("n", 1)];

/// A map key, resolved to a field id; unknown keys give up (pbjson rejects them too).
struct Key(&'static [(&'static str, u8)]);

impl<'de> DeserializeSeed<'de> for Key {
    type Value = u8;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<u8, D::Error> {
        deserializer.deserialize_identifier(self)
    }
}

impl Visitor<'_> for Key {
    type Value = u8;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<u8, E> {
        self.0.iter().find(|(name, _)| *name == key).map(|&(_, id)| id).ok_or_else(|| E::custom(GiveUp))
    }
}

/// A string, borrowed from the line when it has no escapes.
struct Text;

impl<'de> DeserializeSeed<'de> for Text {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Text {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_owned()))
    }
}

/// A uint64 in the protobuf JSON mapping: a non-negative integer, or a string of one.
struct Uint64;

impl<'de> DeserializeSeed<'de> for Uint64 {
    type Value = u64;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<u64, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl Visitor<'_> for Uint64 {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a uint64")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
        Ok(v)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<u64, E> {
        // The same conversion pbjson applies to a quoted number.
        v.parse().map_err(|_| E::custom(GiveUp))
    }
}

/// Appends a JSON array of uint64 to the scratch vector.
struct Stones<'s>(&'s mut Vec<u64>);

impl<'de> DeserializeSeed<'de> for Stones<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Stones<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of uint64")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(stone) = seq.next_element_seed(Uint64)? {
            self.0.push(stone);
        }
        Ok(())
    }
}

struct ProblemVisitor<'s> {
    stones: &'s mut Vec<u64>,
}

impl<'de> Visitor<'de> for ProblemVisitor<'_> {
    type Value = FastProblem<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Problem object")
    }

    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
        let mut id = None;
        let mut game = None;
        while let Some(field) = map.next_key_seed(Key(PROBLEM_FIELDS))? {
            if field == 1 {
                if id.is_some() {
                    return Err(de::Error::custom(GiveUp));
                }
                id = Some(map.next_value_seed(Text)?);
                continue;
            }
            // Two games, or one given twice: pbjson rejects it; `null` for a game is left
            // to pbjson too.
            if game.is_some() {
                return Err(de::Error::custom(GiveUp));
            }
            game = Some(match field {
                2 => FastGame::Sum(
                    map.next_value_seed(GameObject { fields: SUM_GAME_FIELDS, stones: &mut *self.stones })?.0,
                ),
                3 => {
                    map.next_value_seed(GameObject {
                        fields: STONE_GAME_IX_FIELDS,
                        stones: &mut *self.stones,
                    })?;
                    FastGame::Ix
                }
                _ => FastGame::Iv(
                    map.next_value_seed(GameObject {
                        fields: STONE_GAME_IV_FIELDS,
                        stones: &mut *self.stones,
                    })?
                    .1,
                ),
            });
        }
        Ok(FastProblem { id: id.unwrap_or_default(), game })
    }
}

/// One of the three game messages; yields (`num`, `n`), with stones in the scratch.
struct GameObject<'s> {
    fields: &'static [(&'static str, u8)],
    stones: &'s mut Vec<u64>,
}

impl<'de> DeserializeSeed<'de> for GameObject<'_> {
    type Value = (Cow<'de, str>, u64);

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for GameObject<'_> {
    type Value = (Cow<'de, str>, u64);

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a game object")
    }

    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
        let mut seen = false;
        let (mut num, mut n) = (Cow::Borrowed(""), 0);
        // Each game message has exactly one field, so `fields` decides which one this is.
        while map.next_key_seed(Key(self.fields))?.is_some() {
            if std::mem::replace(&mut seen, true) {
                return Err(de::Error::custom(GiveUp));
            }
            match self.fields[0].0 {
                "num" => num = map.next_value_seed(Text)?,
                "stones" => map.next_value_seed(Stones(&mut *self.stones))?,
                _ => n = map.next_value_seed(Uint64)?,
            }
        }
        Ok((num, n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb;
    use prost::Message;

    /// What pbjson makes of `line`, encoded as a batch entry; `None` when it rejects it.
    fn reference(line: &str) -> Option<Vec<u8>> {
        let problem: pb::Problem = serde_json::from_str(line).ok()?;
        problem.game.as_ref()?;
        Some(pb::ProblemBatch { problems: vec![problem] }.encode_to_vec())
    }

    fn fast(line: &str) -> Option<Vec<u8>> {
        let mut stones = Vec::new();
        let problem = parse(line.as_bytes(), &mut stones)?;
        let mut out = BytesMut::new();
        encode_batch_entry(&problem.id, problem.game.as_ref()?, &stones, &mut out);
        Some(out.to_vec())
    }

    #[test]
    fn fast_path_encodes_exactly_what_pbjson_parses() {
        let accepted = [
            r#"{"id":"a1","sumGame":{"num":"?3295???"}}"#,
            r#"{"id":"a1","sum_game":{"num":"?3295???"}}"#,
            r#"{"sumGame":{"num":""}}"#,
            r#"{"sumGame":{}}"#,
            r#"{"id":"","stoneGameIx":{"stones":[]}}"#,
            r#"{"stoneGameIx":{}}"#,
            r#"{"id":"x","stone_game_ix":{"stones":[0,1,"2",18446744073709551615,"18446744073709551615"]}}"#,
            r#"{"stoneGameIv":{"n":0}}"#,
            r#"{"stoneGameIv":{"n":"0"}}"#,
            r#"{"stoneGameIv":{}}"#,
            r#"{"stone_game_iv":{"n":"+7"}}"#,
            r#"{"stoneGameIv":{"n":300},"id":"é\"\u0041\n"}"#,
            r#"  { "id" : "s" , "sumGame" : { "num" : "12" } }  "#,
        ];
        for line in accepted {
            let want = reference(line);
            assert!(want.is_some(), "pbjson accepts {line}");
            assert_eq!(fast(line), want, "{line}");
        }
    }

    #[test]
    fn fast_path_gives_up_where_pbjson_rejects_or_is_unusual() {
        let rejected = [
            r#"["a1",{"num":"1"}]"#,
            r#"{"id":"a1","sumGame":["1"]}"#,
            r#"{"id":"a","id":"b","sumGame":{"num":"1"}}"#,
            r#"{"sumGame":{"num":"1"},"stoneGameIv":{"n":1}}"#,
            r#"{"sumGame":{"num":"1","num":"2"}}"#,
            r#"{"sumGame":{"num":1}}"#,
            r#"{"sumGame":{"num":null}}"#,
            r#"{"sumGame":null}"#,
            r#"{"stoneGameIv":{"n":-1}}"#,
            r#"{"stoneGameIv":{"n":1.5}}"#,
            r#"{"stoneGameIv":{"n":18446744073709551616}}"#,
            r#"{"stoneGameIv":{"n":" 1"}}"#,
            r#"{"stoneGameIx":{"stones":null}}"#,
            r#"{"stoneGameIx":{"stones":[1,null]}}"#,
            r#"{"chess":{}}"#,
            r#"{"id":"a"} x"#,
            r#"{"id":"a"}"#,
            "",
        ];
        for line in rejected {
            assert_eq!(fast(line), None, "{line}");
        }
        // Where the fast path gives up but pbjson accepts, the caller's fallback decides.
        assert!(reference(r#"{"sumGame":null,"stoneGameIv":{"n":1}}"#).is_some());
        assert_eq!(fast(r#"{"sumGame":null,"stoneGameIv":{"n":1}}"#), None);
    }
}
