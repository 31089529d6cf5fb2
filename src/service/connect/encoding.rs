//! How a Connect body is encoded: the message encoding its `Content-Type` (or a GET's
//! `encoding`) names, and the compression a response may take from `Accept-Encoding`.

use http::header::{self, HeaderMap, HeaderValue};

/// How a Connect message is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Encoding {
    Json,
    Proto,
}

impl Encoding {
    /// The encoding of a unary request's `Content-Type` (Connect's unary types only).
    pub(super) fn of_content_type(value: &str) -> Option<Encoding> {
        let (essence, parameters) = value.split_once(';').unwrap_or((value, ""));
        match essence.trim().to_ascii_lowercase().as_str() {
            "application/json" => {
                let charset = parameters.trim().to_ascii_lowercase().replace(' ', "");
                matches!(charset.as_str(), "" | "charset=utf-8" | "charset=utf8").then_some(Encoding::Json)
            }
            "application/proto" if parameters.trim().is_empty() => Some(Encoding::Proto),
            _ => None,
        }
    }

    /// The encoding a GET names in its `encoding` parameter.
    pub(super) fn of_query(value: &str) -> Option<Encoding> {
        match value {
            "json" => Some(Encoding::Json),
            "proto" => Some(Encoding::Proto),
            _ => None,
        }
    }

    pub(super) fn content_type(self) -> HeaderValue {
        HeaderValue::from_static(match self {
            Encoding::Json => "application/json",
            Encoding::Proto => "application/proto",
        })
    }
}

/// A compression for a response body, as `Accept-Encoding` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Compression {
    Gzip,
    Zstd,
}

impl Compression {
    /// The first compression the client accepts that the server offers, in the client's
    /// order; `q=0` refuses one.
    pub(super) fn accepted(headers: &HeaderMap) -> Option<Compression> {
        let accepted = headers.get_all(header::ACCEPT_ENCODING).iter().filter_map(|v| v.to_str().ok());
        accepted.flat_map(|value| value.split(',')).find_map(|item| {
            let mut parts = item.split(';').map(str::trim);
            let name = parts.next()?.to_ascii_lowercase();
            let refused =
                parts.any(|p| p.strip_prefix("q=").and_then(|q| q.parse::<f32>().ok()) == Some(0.0));
            match (name.as_str(), refused) {
                ("gzip", false) => Some(Compression::Gzip),
                ("zstd", false) => Some(Compression::Zstd),
                _ => None,
            }
        })
    }

    pub(super) fn name(self) -> HeaderValue {
        HeaderValue::from_static(match self {
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
        })
    }

    pub(super) fn compress(self, body: &[u8]) -> std::io::Result<Vec<u8>> {
        use std::io::Write;
        match self {
            Compression::Gzip => {
                let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                encoder.write_all(body)?;
                encoder.finish()
            }
            Compression::Zstd => zstd::bulk::compress(body, zstd::DEFAULT_COMPRESSION_LEVEL),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types_and_encodings() {
        assert_eq!(Encoding::of_content_type("application/json"), Some(Encoding::Json));
        assert_eq!(Encoding::of_content_type("Application/JSON; charset=UTF-8"), Some(Encoding::Json));
        assert_eq!(Encoding::of_content_type("application/json;charset=latin1"), None);
        assert_eq!(Encoding::of_content_type("application/proto"), Some(Encoding::Proto));
        assert_eq!(Encoding::of_content_type("application/connect+json"), None);
        assert_eq!(Encoding::of_content_type("application/x-www-form-urlencoded"), None);
        let accept = |value: &'static str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::ACCEPT_ENCODING, HeaderValue::from_static(value));
            Compression::accepted(&headers)
        };
        assert_eq!(accept("deflate, gzip, br, zstd"), Some(Compression::Gzip));
        assert_eq!(accept("br, zstd;q=0.5, gzip"), Some(Compression::Zstd));
        assert_eq!(accept("gzip;q=0, identity"), None);
    }
}
