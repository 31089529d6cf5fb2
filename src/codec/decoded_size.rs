//! What a solver request decodes to, read from the wire without decoding it: the request
//! budget charges it before prost or the fast decoder allocates.

use super::wire::{problem_game_field, WireFields, WireValue};
use crate::games::{GameKind, InputShape};
use crate::pb;

/// What a solver request (each of the four carries its problems in field 1) holds once
/// decoded, in bytes: what [`crate::convert::problem_bytes`] counts for each problem (its
/// struct, its id, a Sum Game's characters, 8 bytes a stone or pile), read from the wire
/// without decoding. The vectors count twice in a message the fast decoder leaves to
/// prost, which grows them by doubling (for a request of `one_problem`, a second problem
/// too: prost merges it into the first); the walk stops where prost would stop.
pub(crate) fn decoded_request_bytes(message: &[u8], one_problem: bool) -> usize {
    let mut size = DecodedSize { usual: true, ..DecodedSize::default() };
    let mut fields = WireFields(message);
    let mut problems = 0;
    loop {
        match fields.next() {
            Ok(None) => break,
            Ok(Some(field)) => {
                size.usual &= field.short_key;
                match (field.number, field.value) {
                    (1, WireValue::Len(problem)) => {
                        problems += 1;
                        size.vectors += std::mem::size_of::<pb::Problem>();
                        if !size.problem(problem) {
                            break;
                        }
                    }
                    (2, WireValue::Varint) => {}
                    _ => size.usual = false,
                }
            }
            Err(_) => {
                size.usual = false;
                break;
            }
        }
    }
    if one_problem && problems > 1 {
        size.usual = false;
    }
    let slack = if size.usual { 0 } else { size.vectors };
    size.strings + size.vectors + slack
}

/// What [`decoded_request_bytes`] adds up.
#[derive(Debug, Default)]
struct DecodedSize {
    /// Ids and Sum Games: prost allocates them exactly.
    strings: usize,
    /// The problems' structs, stones and piles: prost grows these.
    vectors: usize,
    /// Whether the fast decoder takes the message, which sizes the vectors exactly.
    usual: bool,
}

impl DecodedSize {
    /// Adds a `Problem`'s input; false where prost would stop.
    fn problem(&mut self, bytes: &[u8]) -> bool {
        let mut fields = WireFields(bytes);
        let mut games = 0;
        loop {
            let field = match fields.next() {
                Ok(Some(field)) => field,
                Ok(None) => break,
                Err(_) => return false,
            };
            self.usual &= field.short_key;
            let WireValue::Len(value) = field.value else {
                self.usual = false;
                continue;
            };
            games += usize::from(field.number != 1);
            let shape = usize::try_from(field.number)
                .ok()
                .and_then(|number| number.checked_sub(problem_game_field(GameKind::ALL[0])))
                .and_then(|at| GameKind::ALL.get(at))
                .map(|kind| kind.input_shape());
            let complete = match (field.number, shape) {
                (1, _) => {
                    self.strings += value.len();
                    true
                }
                (_, Some(InputShape::Text)) => self.game(value, |size, field| match field {
                    WireValue::Len(num) => size.strings += num.len(),
                    _ => size.usual = false,
                }),
                (_, Some(InputShape::Integers)) => self.game(value, |size, field| match field {
                    // One varint ends at each byte below 0x80.
                    WireValue::Len(packed) => {
                        size.vectors += 8 * packed.iter().filter(|&&byte| byte < 0x80).count();
                    }
                    _ => {
                        size.vectors += 8;
                        size.usual = false;
                    }
                }),
                (_, Some(InputShape::Integer)) => self.game(value, |_, _| {}),
                (_, None) => {
                    self.usual = false;
                    true
                }
            };
            if !complete {
                return false;
            }
        }
        // The fast decoder takes a game once; prost merges a second into the first.
        self.usual &= games <= 1;
        true
    }

    /// Adds a game message's field 1 with `add`; the fast decoder takes that field alone,
    /// once. False where prost would stop.
    fn game(&mut self, bytes: &[u8], add: impl Fn(&mut Self, WireValue<'_>)) -> bool {
        let mut fields = WireFields(bytes);
        let mut count = 0;
        loop {
            match fields.next() {
                Ok(Some(field)) => {
                    count += 1;
                    self.usual &= field.short_key && field.number == 1;
                    if field.number == 1 {
                        add(self, field.value);
                    }
                }
                Ok(None) => break,
                Err(_) => return false,
            }
        }
        self.usual &= count <= 1;
        true
    }
}
