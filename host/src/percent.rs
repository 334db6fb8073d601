//! `%xx` escapes, as URIs write them: a connection string's options and a
//! `$ref`'s fragment both allow them.

/// `text` with each `%xx` escape decoded; a `%` not followed by two hex
/// digits stays as it is, and bytes that do not form UTF-8 are replaced.
pub(crate) fn decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_decode_and_stray_percents_stay() {
        assert_eq!(decoded("a%20b%2Fc"), "a b/c");
        assert_eq!(decoded("100%"), "100%");
        assert_eq!(decoded("%zz"), "%zz");
    }
}
