//! A Connect GET's query, for the procedures the contract marks `NO_SIDE_EFFECTS`:
//! `?encoding=json&message=...`, optionally `base64=1`, `compression` and `connect=v1`.

use base64::Engine as _;
use bytes::Bytes;
use http::header::HeaderValue;

use super::encoding::Encoding;
use super::refusal::Refusal;
use crate::echo;

/// `compression` and `connect=v1`.
#[derive(Debug)]
pub(super) struct GetQuery {
    pub(super) encoding: Encoding,
    pub(super) compression: Option<HeaderValue>,
    pub(super) message: Bytes,
}

impl GetQuery {
    pub(super) fn parse(query: &str) -> Result<GetQuery, Refusal> {
        let (mut encoding, mut message, mut base64, mut compression, mut version) =
            (None, None, false, None, None);
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = query_decode(value);
            match key {
                "encoding" => encoding = Some(value),
                "message" => message = Some(value),
                "base64" => base64 = value == b"1",
                "compression" => compression = Some(value),
                "connect" => version = Some(value),
                _ => {}
            }
        }
        let bad = Refusal::bad_request;
        if let Some(version) = version {
            if version != b"v1" {
                return Err(bad(format!(
                    "connect must be \"v1\": got {}",
                    echo::quoted(&String::from_utf8_lossy(&version))
                )));
            }
        }
        let encoding = encoding
            .as_deref()
            .and_then(|e| std::str::from_utf8(e).ok())
            .and_then(Encoding::of_query)
            .ok_or_else(|| bad("a Connect GET needs encoding=json or encoding=proto".to_owned()))?;
        let message = message.ok_or_else(|| bad("a Connect GET needs its message parameter".to_owned()))?;
        let message = match base64 {
            true => {
                let trimmed =
                    message.strip_suffix(b"==").or_else(|| message.strip_suffix(b"=")).unwrap_or(&message);
                base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .decode(trimmed)
                    .map_err(|err| bad(format!("message is not URL-safe base64: {err}")))?
            }
            false => message,
        };
        let compression = compression
            .filter(|c| c != b"identity")
            .map(|c| HeaderValue::from_bytes(&c).map_err(|_| bad("compression is not a token".to_owned())))
            .transpose()?;
        Ok(GetQuery { encoding, compression, message: Bytes::from(message) })
    }
}

/// A query value, percent-decoded, with `+` as a space (as browsers' `URLSearchParams`
/// and Connect's clients read it).
fn query_decode(value: &str) -> Vec<u8> {
    let spaced = value.replace('+', " ");
    percent_encoding::percent_decode_str(&spaced).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_queries_decode_percent_and_base64() {
        let query = GetQuery::parse("connect=v1&encoding=json&message=%7B%22problem%22%3A%7B%7D%7D").unwrap();
        assert_eq!((query.encoding, &query.message[..]), (Encoding::Json, &br#"{"problem":{}}"#[..]));
        let query = GetQuery::parse("encoding=proto&base64=1&message=CgA").unwrap();
        assert_eq!(&query.message[..], [10, 0]);
        let query = GetQuery::parse("encoding=proto&base64=1&message=CgA%3D").unwrap();
        assert_eq!(&query.message[..], [10, 0]);
        assert!(GetQuery::parse("message=x").unwrap_err().message.contains("encoding=json"));
        assert!(GetQuery::parse("encoding=json").unwrap_err().message.contains("message parameter"));
        assert!(GetQuery::parse("connect=v2&encoding=json&message=x")
            .unwrap_err()
            .message
            .contains("\"v1\""));
    }
}
