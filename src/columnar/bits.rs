//! Validity bitmaps spread into a byte a row, for loops that read a row's validity
//! beside its value (the fingerprint of a table, the game of a mixed batch's row).

use arrow_buffer::BooleanBuffer;

/// Byte `k` of `SPREAD[b]` is bit `k` of `b`.
const SPREAD: [u64; 256] = {
    let mut table = [0u64; 256];
    let mut byte = 0;
    while byte < 256 {
        let mut bit = 0;
        while bit < 8 {
            table[byte] |= ((byte as u64 >> bit) & 1) << (8 * bit);
            bit += 1;
        }
        byte += 1;
    }
    table
};

/// Appends a byte a bit of `bits` to `out`, 1 for a set bit and 0 for a clear one, eight
/// bits at a time.
pub(crate) fn spread_bits(bits: &BooleanBuffer, out: &mut Vec<u8>) {
    let chunks = bits.bit_chunks();
    out.reserve(bits.len());
    for word in chunks.iter() {
        for byte in word.to_le_bytes() {
            out.extend_from_slice(&SPREAD[usize::from(byte)].to_le_bytes());
        }
    }
    let rest = chunks.remainder_bits();
    out.extend((0..chunks.remainder_len()).map(|bit| ((rest >> bit) & 1) as u8));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_are_spread_a_byte_each_whatever_their_offset() {
        let bits: Vec<bool> = (0..300).map(|i| (i * 7 + i / 3) % 5 < 2).collect();
        let buffer = BooleanBuffer::from(bits.clone());
        for (offset, len) in [(0, 300), (1, 64), (7, 130), (63, 200), (64, 64), (3, 5), (0, 0)] {
            let mut out = vec![9];
            spread_bits(&buffer.slice(offset, len), &mut out);
            let expected: Vec<u8> =
                std::iter::once(9).chain(bits[offset..offset + len].iter().map(|&b| u8::from(b))).collect();
            assert_eq!(out, expected, "offset {offset}, len {len}");
        }
    }
}
