//! The redaction corpus (issue #13, point 2), generated deterministically: no real key is in
//! it, every token is drawn from a seeded xorshift. Shared by the recall test
//! (`tests/it/redaction_corpus/mod.rs`) and the benchmark (`benches/redact.rs`, which also
//! writes it to files for gitleaks), so both measure the same bytes.
//!
//! - **Secrets:** one per case, of a named kind (the reference list is gitleaks' default
//!   rule set plus the forms the issue names), each kind in twelve cases: plain, in prose, in
//!   a shell command, inside a tool call's JSON arguments (quotes and newlines arrive
//!   backslash-escaped), inside a JSON message, and in an env/YAML file — twice, with the
//!   label's case (upper, lower, mixed) and the value's quoting varied where the kind allows,
//!   and URL-encoded values where the kind is a URL.
//! - **Look-alikes:** text that must come out byte-identical: git SHAs, UUIDs, SHA-256
//!   digests, base64 image data, long identifiers, code that names a secret without holding
//!   one, and placeholders (`YOUR_API_KEY`, `<token>`, `${DB_PASSWORD}`, `changeme`,
//!   `ghp_xxxx…`, `AKIAXXXXXXXXXXXXXXXX`).
//!
//! **`EXAMPLE` placeholders.** A value that *names* a secret instead of being one
//! (`YOUR_API_KEY`, `your-token-here`, `<password>`, `example`, `changeme`, a run of `x`) is
//! a placeholder and stays. A value that has a real credential's exact shape is redacted even
//! when it ends in `EXAMPLE`: `AKIAIOSFODNN7EXAMPLE` and
//! `wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY` are AWS's documentation keys, and nothing in
//! their bytes tells them from a key someone made look like one; hiding a sample costs a
//! reader nothing, publishing a key costs its owner. So the look-alikes hold no
//! shape-complete `EXAMPLE` key, and the corpus does not count one as a secret either.
//!
//! A secret counts as redacted when no 8-character piece of it survives in the output
//! ([`survives`]).

#![allow(dead_code)]

pub struct Case {
    pub kind: &'static str,
    pub context: &'static str,
    pub text: String,
    pub secret: String,
}

pub struct LookAlike {
    pub kind: &'static str,
    pub text: String,
}

/// How many cases each secret kind gets: six contexts, two variants each.
pub const PER_KIND: usize = 12;

/// The first 8-character piece of `secret` (or the whole secret, if shorter) found in
/// `output`, if any.
pub fn survives<'s>(secret: &'s str, output: &str) -> Option<&'s str> {
    let chars: Vec<(usize, char)> = secret.char_indices().collect();
    if chars.len() <= 8 {
        return output.contains(secret).then_some(secret);
    }
    (0..=chars.len() - 8).find_map(|i| {
        let start = chars[i].0;
        let end = chars.get(i + 8).map_or(secret.len(), |&(at, _)| at);
        let piece = &secret[start..end];
        output.contains(piece).then_some(piece)
    })
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
    fn token(&mut self, len: usize, alphabet: &[u8]) -> String {
        (0..len)
            .map(|_| char::from(alphabet[self.below(alphabet.len())]))
            .collect()
    }
    /// A password-like value: starts with a letter, holds a digit, ends alphanumeric.
    fn password(&mut self, len: usize) -> String {
        let mut out = self.token(1, LETTERS);
        out.push_str(&self.token(len - 3, PASSWORD));
        out.push_str(&self.token(1, DIGITS));
        out.push_str(&self.token(1, ALNUM));
        out
    }
}

const DIGITS: &[u8] = b"0123456789";
const LETTERS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const LOWER_ALNUM: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
const UPPER_DIGITS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
const HEX: &[u8] = b"0123456789abcdef";
const HEX_MIXED: &[u8] = b"0123456789abcdefABCDEF";
const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const B64URL: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
/// Characters a password may hold bare in every context here (no quote, blank, `;`, `&`…).
const PASSWORD: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789!*-_.~^+";

/// Three casings of a label: upper, lower, mixed, by variant.
fn cased(label: &str, variant: usize) -> String {
    match variant % 3 {
        0 => label.to_ascii_uppercase(),
        1 => label.to_ascii_lowercase(),
        _ => {
            let mut out = String::new();
            let mut upper = true;
            for c in label.chars() {
                if c.is_ascii_alphabetic() {
                    out.push(if upper {
                        c.to_ascii_uppercase()
                    } else {
                        c.to_ascii_lowercase()
                    });
                    upper = false;
                } else {
                    out.push(c);
                    upper = true;
                }
            }
            out
        }
    }
}

/// A value quoted three ways by variant: bare, double, single.
fn quoted(value: &str, variant: usize) -> String {
    match variant % 3 {
        0 => value.to_owned(),
        1 => format!("\"{value}\""),
        _ => format!("'{value}'"),
    }
}

fn base64(bytes: &[u8]) -> String {
    const TABLE: &[u8] = B64;
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(TABLE[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn url_encode(value: &str) -> String {
    let mut out = String::new();
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn json_escape(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out
}

fn uuid(rng: &mut Rng, alphabet: &[u8]) -> String {
    format!(
        "{}-{}-{}-{}-{}",
        rng.token(8, alphabet),
        rng.token(4, alphabet),
        rng.token(4, alphabet),
        rng.token(4, alphabet),
        rng.token(12, alphabet)
    )
}

/// PEM body lines of base64, 64 per line, the last shorter.
fn pem_body(rng: &mut Rng, lines: usize) -> Vec<String> {
    let mut body: Vec<String> = (0..lines).map(|_| rng.token(64, B64)).collect();
    body.push(format!("{}==", rng.token(22, B64)));
    body
}

/// A PEM block with `label`, its lines joined by `newline`; returns (block, body).
fn pem(
    rng: &mut Rng,
    label: &str,
    headers: &[&str],
    lines: usize,
    newline: &str,
) -> (String, String) {
    let body = pem_body(rng, lines).join(newline);
    let mut block = format!("-----BEGIN {label}-----{newline}");
    for header in headers {
        block.push_str(header);
        block.push_str(newline);
    }
    if !headers.is_empty() {
        block.push_str(newline);
    }
    block.push_str(&body);
    block.push_str(&format!("{newline}-----END {label}-----"));
    (block, body)
}

type Generator = fn(&mut Rng, usize) -> (String, String);

/// A kind whose snippet is just the token.
macro_rules! token_kind {
    ($name:literal, |$rng:ident, $v:ident| $token:expr) => {
        ($name, {
            fn generate($rng: &mut Rng, $v: usize) -> (String, String) {
                let token: String = $token;
                let snippet = match $v % 4 {
                    0 => token.clone(),
                    1 => format!("key: {token}"),
                    2 => format!("the value is {token}."),
                    _ => format!("'{token}'"),
                };
                (snippet, token)
            }
            generate as Generator
        })
    };
}

/// A kind with its own snippet: the closure returns (snippet, secret).
macro_rules! kind {
    ($name:literal, |$rng:ident, $v:ident| $body:expr) => {
        ($name, {
            fn generate($rng: &mut Rng, $v: usize) -> (String, String) {
                $body
            }
            generate as Generator
        })
    };
}

fn kinds() -> Vec<(&'static str, Generator)> {
    vec![
        kind!("aws_access_key_id", |rng, v| {
            let id = format!("AKIA{}", rng.token(16, UPPER_DIGITS));
            let snippet = match v % 3 {
                0 => format!("aws_access_key_id = {id}"),
                1 => format!("{{\"AccessKeyId\": \"{id}\"}}"),
                _ => format!("export AWS_ACCESS_KEY_ID={id}"),
            };
            (snippet, id)
        }),
        token_kind!("aws_session_key_id", |rng, v| format!(
            "ASIA{}",
            rng.token(16, UPPER_DIGITS)
        )),
        kind!("aws_secret_access_key", |rng, v| {
            let key = rng.token(40, B64);
            let snippet = match v % 4 {
                0 => format!("aws_secret_access_key = {key}"),
                1 => format!("AWS_SECRET_ACCESS_KEY={key}"),
                2 => format!("{{\"SecretAccessKey\": \"{key}\", \"SessionToken\": null}}"),
                _ => format!("secretAccessKey: '{key}'"),
            };
            (snippet, key)
        }),
        token_kind!("github_classic_token", |rng, v| format!(
            "ghp_{}",
            rng.token(36, ALNUM)
        )),
        token_kind!("github_fine_grained_token", |rng, v| format!(
            "github_pat_11{}_{}",
            rng.token(20, UPPER_DIGITS),
            rng.token(59, ALNUM)
        )),
        token_kind!("github_oauth_token", |rng, v| format!(
            "gho_{}",
            rng.token(36, ALNUM)
        )),
        token_kind!("github_app_token", |rng, v| format!(
            "{}_{}",
            if v.is_multiple_of(2) { "ghs" } else { "ghu" },
            rng.token(36, ALNUM)
        )),
        token_kind!("github_refresh_token", |rng, v| format!(
            "ghr_{}",
            rng.token(76, ALNUM)
        )),
        token_kind!("gitlab_pat", |rng, v| format!(
            "glpat-{}",
            rng.token(20, B64URL)
        )),
        token_kind!("gitlab_runner_deploy_trigger", |rng, v| format!(
            "{}{}",
            ["glrt-", "gldt-", "glptt-", "glcbt-"][v % 4],
            rng.token(20, ALNUM)
        )),
        token_kind!("slack_bot_token", |rng, v| format!(
            "xoxb-{}-{}-{}",
            rng.token(12, DIGITS),
            rng.token(13, DIGITS),
            rng.token(24, ALNUM)
        )),
        token_kind!("slack_user_token", |rng, v| format!(
            "xoxp-{}-{}-{}-{}",
            rng.token(12, DIGITS),
            rng.token(12, DIGITS),
            rng.token(13, DIGITS),
            rng.token(32, HEX)
        )),
        token_kind!("slack_app_token", |rng, v| format!(
            "xapp-1-A{}-{}-{}",
            rng.token(10, UPPER_DIGITS),
            rng.token(13, DIGITS),
            rng.token(64, HEX)
        )),
        kind!("slack_webhook", |rng, v| {
            let path = format!(
                "T{}/B{}/{}",
                rng.token(10, UPPER_DIGITS),
                rng.token(10, UPPER_DIGITS),
                rng.token(24, ALNUM)
            );
            let _ = v;
            (format!("https://hooks.slack.com/services/{path}"), path)
        }),
        token_kind!("stripe_live_secret", |rng, v| format!(
            "sk_live_{}",
            rng.token(24 + v * 6, ALNUM)
        )),
        token_kind!("stripe_test_secret", |rng, v| format!(
            "sk_test_{}",
            rng.token(24 + v * 6, ALNUM)
        )),
        token_kind!("stripe_restricted", |rng, v| format!(
            "{}_{}",
            if v.is_multiple_of(2) {
                "rk_live"
            } else {
                "rk_test"
            },
            rng.token(99, ALNUM)
        )),
        token_kind!("google_api_key", |rng, v| format!(
            "AIza{}",
            rng.token(35, B64URL)
        )),
        kind!("gcp_service_account_json", |rng, v| {
            let (block, body) = pem(rng, "PRIVATE KEY", &[], 25, "\\n");
            let snippet = format!(
                "{{\n  \"type\": \"service_account\",\n  \"project_id\": \"proj-{}\",\n  \"private_key_id\": \"{}\",\n  \"private_key\": \"{block}\\n\",\n  \"client_email\": \"ci@proj.iam.gserviceaccount.com\"\n}}",
                rng.token(6, LOWER_ALNUM),
                rng.token(40, HEX)
            );
            let _ = v;
            (snippet, body)
        }),
        kind!("azure_storage_account_key", |rng, v| {
            let key = format!("{}==", rng.token(86, B64));
            let snippet = format!(
                "DefaultEndpointsProtocol=https;AccountName=acct{};AccountKey={key};EndpointSuffix=core.windows.net",
                rng.token(6, LOWER_ALNUM)
            );
            let _ = v;
            (snippet, key)
        }),
        kind!("azure_service_bus_connection_string", |rng, v| {
            let key = format!("{}=", rng.token(43, B64));
            let snippet = format!(
                "Endpoint=sb://ns-{}.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey={key}",
                rng.token(6, LOWER_ALNUM)
            );
            let _ = v;
            (snippet, key)
        }),
        kind!("azure_sas_token", |rng, v| {
            let sig = url_encode(&format!("{}=", rng.token(43, B64)));
            let query = format!(
                "sv=2022-11-02&ss=b&srt=co&sp=rl&se=2026-12-31T00:00:00Z&spr=https&sig={sig}"
            );
            let snippet = if v.is_multiple_of(2) {
                format!(
                    "https://acct{}.blob.core.windows.net/backups/db.bak?{query}",
                    rng.token(4, LOWER_ALNUM)
                )
            } else {
                format!("AZURE_STORAGE_SAS_TOKEN=\"?{query}\"")
            };
            (snippet, sig)
        }),
        token_kind!("openai_key", |rng, v| format!(
            "sk-{}",
            rng.token(48, ALNUM)
        )),
        token_kind!("openai_project_key", |rng, v| format!(
            "sk-{}-{}",
            if v % 3 == 2 { "svcacct" } else { "proj" },
            rng.token(120 + v, B64URL)
        )),
        token_kind!("anthropic_key", |rng, v| format!(
            "sk-ant-{}-{}AA",
            if v % 4 == 3 { "admin01" } else { "api03" },
            rng.token(93, B64URL)
        )),
        token_kind!("huggingface_token", |rng, v| format!(
            "hf_{}",
            rng.token(34, LETTERS)
        )),
        token_kind!("npm_token", |rng, v| format!(
            "npm_{}",
            rng.token(36, ALNUM)
        )),
        token_kind!("pypi_token", |rng, v| format!(
            "pypi-AgEIcHlwaS5vcmc{}",
            rng.token(70 + v, B64URL)
        )),
        token_kind!("dockerhub_pat", |rng, v| format!(
            "dckr_pat_{}",
            rng.token(27, B64URL)
        )),
        token_kind!("twilio_account_sid", |rng, v| format!(
            "AC{}",
            rng.token(32, HEX)
        )),
        token_kind!("twilio_api_key", |rng, v| format!(
            "SK{}",
            rng.token(32, HEX)
        )),
        kind!("twilio_auth_token", |rng, v| {
            let token = rng.token(32, HEX);
            let snippet = match v % 4 {
                0 => format!("TWILIO_AUTH_TOKEN={token}"),
                1 => format!(
                    "{{\"account_sid\": \"AC{}\", \"auth_token\": \"{token}\"}}",
                    rng.token(32, HEX)
                ),
                2 => format!("twilio:\n  auth_token: {token}\n"),
                _ => format!("export TWILIO_AUTH_TOKEN='{token}'"),
            };
            (snippet, token)
        }),
        token_kind!("sendgrid_key", |rng, v| format!(
            "SG.{}.{}",
            rng.token(22, B64URL),
            rng.token(43, B64URL)
        )),
        kind!("mailgun_key", |rng, v| {
            let key = format!("key-{}", rng.token(32, HEX));
            let snippet = match v % 3 {
                0 => format!("MAILGUN_API_KEY={key}"),
                1 => format!(
                    "curl -s --user 'api:{key}' https://api.mailgun.net/v3/mg.example.org/messages"
                ),
                _ => key.clone(),
            };
            (snippet, key)
        }),
        token_kind!("shopify_token", |rng, v| format!(
            "{}_{}",
            ["shpat", "shpca", "shppa", "shpss"][v % 4],
            rng.token(32, if v.is_multiple_of(2) { HEX } else { HEX_MIXED })
        )),
        token_kind!("digitalocean_token", |rng, v| format!(
            "{}_v1_{}",
            ["dop", "doo", "dor"][v % 3],
            rng.token(64, HEX)
        )),
        kind!("heroku_api_key", |rng, v| {
            match v % 3 {
                0 => {
                    let key = format!("HRKU-AA{}", rng.token(58, B64URL));
                    (key.clone(), key)
                }
                1 => {
                    let key = uuid(rng, HEX);
                    (format!("HEROKU_API_KEY={key}"), key)
                }
                _ => {
                    let key = uuid(rng, HEX);
                    (format!("heroku_api_key: \"{key}\""), key)
                }
            }
        }),
        kind!("datadog_key", |rng, v| {
            let api = rng.token(32, HEX);
            let app = rng.token(40, HEX);
            match v % 4 {
                0 => (format!("DD_API_KEY={api}"), api),
                1 => (format!("DD_APP_KEY={app}"), app),
                2 => (
                    format!(
                        "curl -H \"DD-API-KEY: {api}\" https://api.datadoghq.com/api/v1/validate"
                    ),
                    api,
                ),
                _ => (format!("datadog:\n  application_key: {app}\n"), app),
            }
        }),
        kind!("jwt", |rng, v| {
            let jwt = format!(
                "eyJhbGciOiJ{}.eyJ{}.{}",
                rng.token(20, B64URL),
                rng.token(60 + v * 4, B64URL),
                rng.token(43, B64URL)
            );
            let snippet = if v.is_multiple_of(2) {
                jwt.clone()
            } else {
                format!("id_token={jwt}")
            };
            (snippet, jwt)
        }),
        kind!("pem_rsa_private_key", |rng, v| {
            let headers: &[&str] = if v.is_multiple_of(2) {
                &[]
            } else {
                &[
                    "Proc-Type: 4,ENCRYPTED",
                    "DEK-Info: AES-128-CBC,00FF00FF00FF00FF00FF00FF00FF00FF",
                ]
            };
            let (block, body) = pem(rng, "RSA PRIVATE KEY", headers, 24, "\n");
            (block, body)
        }),
        kind!("pem_ec_private_key", |rng, v| {
            let _ = v;
            pem(rng, "EC PRIVATE KEY", &[], 3, "\n")
        }),
        kind!("pem_pkcs8_private_key", |rng, v| {
            let _ = v;
            pem(rng, "PRIVATE KEY", &[], 25, "\n")
        }),
        kind!("pem_encrypted_private_key", |rng, v| {
            let _ = v;
            pem(rng, "ENCRYPTED PRIVATE KEY", &[], 26, "\n")
        }),
        kind!("pem_dsa_private_key", |rng, v| {
            let _ = v;
            pem(rng, "DSA PRIVATE KEY", &[], 10, "\n")
        }),
        kind!("openssh_private_key", |rng, v| {
            let _ = v;
            pem(rng, "OPENSSH PRIVATE KEY", &[], 6, "\n")
        }),
        kind!("pgp_private_key_block", |rng, v| {
            let (block, body) = pem(
                rng,
                "PGP PRIVATE KEY BLOCK",
                &["Comment: exported"],
                20,
                "\n",
            );
            let _ = v;
            (block, body)
        }),
        kind!("url_postgres", |rng, v| {
            let pw = rng.password(16);
            let scheme = if v.is_multiple_of(2) {
                "postgres"
            } else {
                "postgresql"
            };
            (
                format!(
                    "{scheme}://app_user:{pw}@db-{}.internal:5432/app?sslmode=require",
                    rng.token(4, LOWER_ALNUM)
                ),
                pw,
            )
        }),
        kind!("url_mysql", |rng, v| {
            let pw = rng.password(14);
            let _ = v;
            (format!("mysql://root:{pw}@127.0.0.1:3306/shop"), pw)
        }),
        kind!("url_mongodb_srv", |rng, v| {
            let pw = rng.password(18);
            let _ = v;
            (format!("mongodb+srv://admin:{pw}@cluster0.{}.mongodb.net/test?retryWrites=true&w=majority", rng.token(5, LOWER_ALNUM)), pw)
        }),
        kind!("url_redis", |rng, v| {
            let pw = rng.password(20);
            let url = if v.is_multiple_of(2) {
                format!("redis://:{pw}@cache.internal:6379/0")
            } else {
                format!("rediss://default:{pw}@cache.internal:6380")
            };
            (url, pw)
        }),
        kind!("url_amqp", |rng, v| {
            let pw = rng.password(16);
            let scheme = if v.is_multiple_of(2) { "amqp" } else { "amqps" };
            (format!("{scheme}://guest:{pw}@mq.internal:5672/vhost"), pw)
        }),
        kind!("url_password_url_encoded", |rng, v| {
            let raw = format!(
                "{}@{}/{}:{}#",
                rng.token(5, ALNUM),
                rng.token(4, ALNUM),
                rng.token(3, DIGITS),
                rng.token(4, ALNUM)
            );
            let pw = url_encode(&raw);
            let scheme = ["https", "postgres", "mongodb", "amqp"][v % 4];
            (format!("{scheme}://deploy:{pw}@host.internal/path"), pw)
        }),
        kind!("authorization_basic", |rng, v| {
            let creds = base64(format!("deploy:{}", rng.password(14)).as_bytes());
            let header = cased("authorization", v);
            let scheme = ["Basic", "basic", "BASIC"][v % 3];
            let snippet = match v % 4 {
                0 | 1 => format!("{header}: {scheme} {creds}"),
                2 => format!("curl -H '{header}: {scheme} {creds}' https://registry.internal/v2/"),
                _ => format!("{{\"headers\": {{\"{header}\": \"{scheme} {creds}\"}}}}"),
            };
            (snippet, creds)
        }),
        kind!("authorization_bearer", |rng, v| {
            let token = rng.token(40, ALNUM);
            let header = cased("authorization", v);
            let scheme = ["Bearer", "bearer", "BEARER"][v % 3];
            (format!("{header}: {scheme} {token}"), token)
        }),
        kind!("bearer_bare", |rng, v| {
            // `bearer <token>` pasted without its `Authorization:` header, any letter case.
            let token = if v.is_multiple_of(2) {
                rng.token(40, ALNUM)
            } else {
                format!("{}.{}", rng.token(24, LOWER_ALNUM), rng.token(20, ALNUM))
            };
            let word = ["bEaReR", "BeArEr", "bearer", "BEARER", "Bearer", "beaRER"][v % 6];
            let snippet = match v % 4 {
                0 => format!("{word} {token}"),
                1 => format!("the CI uses {word}\t{token} for the registry"),
                2 => format!("{{\"auth\": \"{word} {token}\"}}"),
                _ => format!("{{\\\"auth\\\": \\\"{word}  {token}\\\"}}"),
            };
            (snippet, token)
        }),
        kind!("authorization_token", |rng, v| {
            let token = rng.token(40, HEX);
            let header = cased("authorization", v);
            let scheme = ["Token", "token", "TOKEN"][v % 3];
            let snippet = if v.is_multiple_of(2) {
                format!("{header}: {scheme} {token}")
            } else {
                format!("curl -H \"{header}: {scheme} {token}\" https://api.internal/v1/me")
            };
            (snippet, token)
        }),
        kind!("kubeconfig_token", |rng, v| {
            let token = if v.is_multiple_of(2) {
                format!(
                    "{}.{}",
                    rng.token(6, LOWER_ALNUM),
                    rng.token(16, LOWER_ALNUM)
                )
            } else {
                rng.token(48, ALNUM)
            };
            (format!("apiVersion: v1\nkind: Config\nusers:\n- name: ci-bot\n  user:\n    token: {token}\n"), token)
        }),
        kind!("env_password", |rng, v| {
            let pw = rng.password(14);
            (
                format!("{}={}", cased("password", v), quoted(&pw, v / 3)),
                pw,
            )
        }),
        kind!("env_db_password", |rng, v| {
            let pw = rng.password(16);
            (
                format!("{}={}", cased("db_password", v), quoted(&pw, v / 3)),
                pw,
            )
        }),
        kind!("env_secret", |rng, v| {
            let secret = rng.token(32, ALNUM);
            let label = if v.is_multiple_of(2) {
                "secret"
            } else {
                "app_secret"
            };
            (
                format!("{}={}", cased(label, v), quoted(&secret, v / 3)),
                secret,
            )
        }),
        kind!("env_api_key", |rng, v| {
            let key = rng.token(32, ALNUM);
            let label = ["api_key", "weather_api_key", "apikey"][v % 3];
            (format!("{}={}", cased(label, v / 3), quoted(&key, v)), key)
        }),
        kind!("env_token", |rng, v| {
            let token = rng.token(40, ALNUM);
            let label = ["token", "access_token", "auth_token"][v % 3];
            (
                format!("{}={}", cased(label, v / 3), quoted(&token, v)),
                token,
            )
        }),
        kind!("env_private_key", |rng, v| {
            let key = format!("0x{}", rng.token(64, HEX));
            let label = if v.is_multiple_of(2) {
                "private_key"
            } else {
                "wallet_private_key"
            };
            (format!("{}={}", cased(label, v), quoted(&key, v / 2)), key)
        }),
        kind!("env_export", |rng, v| {
            let value = rng.token(36, ALNUM);
            let label = [
                "service_secret",
                "gh_token",
                "sentry_auth_token",
                "openweather_api_key",
            ][v % 4];
            (
                format!("export {}={}", cased(label, v), quoted(&value, v / 4)),
                value,
            )
        }),
        kind!("flag_password_equals", |rng, v| {
            let pw = rng.password(14);
            let flag = ["--password", "--db-password", "--admin-password"][v % 3];
            (
                format!(
                    "./manage.py createuser --username ops {flag}={}",
                    quoted(&pw, v / 3)
                ),
                pw,
            )
        }),
        kind!("flag_password_space", |rng, v| {
            let pw = rng.password(14);
            let flag = ["--password", "--db-password", "--passwd"][v % 3];
            (
                format!(
                    "deployctl login --user ops {flag} {} --region eu-west-1",
                    quoted(&pw, v / 3)
                ),
                pw,
            )
        }),
        kind!("flag_mysql_p", |rng, v| {
            let pw = rng.password(12);
            let snippet = match v % 3 {
                0 => format!("mysql -u root -p{pw} shop"),
                1 => format!(
                    "mysqldump -h db.internal -uroot -p{pw} --single-transaction shop > shop.sql"
                ),
                _ => format!("mysql --host=db -u app -p'{pw}' -e 'select 1'"),
            };
            (snippet, pw)
        }),
        kind!("json_password_field", |rng, v| {
            let pw = rng.password(15);
            let label = ["password", "db_password", "Password"][v % 3];
            (
                format!("{{\"username\": \"svc-deploy\", \"{label}\": \"{pw}\", \"port\": 5432}}"),
                pw,
            )
        }),
        kind!("yaml_password_field", |rng, v| {
            let pw = rng.password(15);
            let label = ["password", "db_password", "Password"][v % 3];
            (
                format!(
                    "database:\n  host: db.internal\n  user: app\n  {label}: {}\n  pool: 5\n",
                    quoted(&pw, v / 3)
                ),
                pw,
            )
        }),
        kind!("secret_key_base", |rng, v| {
            let value = rng.token(128, HEX);
            (format!("{}={value}", cased("secret_key_base", v)), value)
        }),
        kind!("django_secret_key", |rng, v| {
            let value = format!(
                "django-insecure-{}",
                rng.token(50, b"abcdefghijklmnopqrstuvwxyz0123456789!@#%^&*(-_=+)")
            );
            let snippet = match v % 3 {
                0 => format!("DJANGO_SECRET_KEY='{value}'"),
                1 => format!("SECRET_KEY = '{value}'"),
                _ => format!("DJANGO_SECRET_KEY=\"{value}\""),
            };
            (snippet, value)
        }),
        kind!("url_query_token", |rng, v| {
            let token = rng.token(32, ALNUM);
            let label = [
                "access_token",
                "api_key",
                "token",
                "apiKey",
                "client_secret",
            ][v % 5];
            (
                format!("https://api.internal.test/v1/items?limit=50&{label}={token}&page=2"),
                token,
            )
        }),
        kind!("connection_string_password", |rng, v| {
            let pw = rng.password(16);
            let label = ["Password", "PWD", "password"][v % 3];
            (format!("Server=tcp:db.internal,1433;Database=app;User ID=sa;{label}={pw};Encrypt=true;"), pw)
        }),
    ]
}

/// The contexts a snippet is placed in; `index` picks one.
fn in_context(index: usize, snippet: &str) -> (&'static str, String) {
    let multiline = snippet.contains('\n');
    let shell = if multiline {
        format!("$ cat > /tmp/deploy.conf <<'EOF'\n{snippet}\nEOF\n$ ./deploy.sh --env staging")
    } else {
        format!("$ {snippet} && ./deploy.sh --env staging\nDeploying to staging... done")
    };
    match index % 6 {
        0 => ("plain", snippet.to_owned()),
        1 => (
            "prose",
            format!("I added this to the config:\n\n{snippet}\n\nbut the service still answers 401 — any idea why?"),
        ),
        2 => ("shell", shell),
        3 => (
            "tool_call_json_arguments",
            format!(
                "{{\"type\":\"tool_use\",\"id\":\"toolu_01\",\"name\":\"Bash\",\"input\":{{\"command\":\"{}\",\"timeout\":120000}}}}",
                json_escape(&shell)
            ),
        ),
        4 => (
            "json_message",
            format!(
                "{{\"role\":\"user\",\"content\":\"Here it is: {} — thanks!\"}}",
                json_escape(snippet)
            ),
        ),
        _ => (
            "env_or_yaml_file",
            format!("# staging settings\nAPP_ENV=staging\nLOG_LEVEL=info\n{snippet}\nFEATURES=search,sync\n"),
        ),
    }
}

/// Every secret case: `PER_KIND` per kind.
pub fn secrets() -> Vec<Case> {
    let mut rng = Rng(0x5ec2_e7c0_2b05_0013);
    let mut cases = Vec::new();
    for (kind, generate) in kinds() {
        for i in 0..PER_KIND {
            let (snippet, secret) = generate(&mut rng, i);
            let (context, text) = in_context(i, &snippet);
            cases.push(Case {
                kind,
                context,
                text,
                secret,
            });
        }
    }
    cases
}

/// The look-alikes: each text must come out byte-identical.
pub fn look_alikes() -> Vec<LookAlike> {
    let mut rng = Rng(0x100c_a11c_e500_0013);
    let mut out = Vec::new();
    let mut add = |kind: &'static str, text: String| out.push(LookAlike { kind, text });
    for i in 0..30 {
        let sha = rng.token(40, HEX);
        let text = match i % 3 {
            0 => format!("commit {sha}\nAuthor: Dev <dev@example.org>\n\n    fix: window cut at char boundary"),
            1 => format!("{} fix: ledger append ({})", &sha[..7], rng.token(40, HEX)),
            _ => format!("Merge {sha} into {}", rng.token(40, HEX)),
        };
        add("git_sha", text);
    }
    for i in 0..30 {
        let id = uuid(&mut rng, HEX);
        let text = match i % 5 {
            0 => format!("request id {id} failed after 3 retries"),
            1 => format!("{{\"id\": \"{id}\", \"status\": \"ok\"}}"),
            2 => format!("session-{id}.jsonl"),
            3 => format!("SESSION_ID={id}"),
            _ => format!("trace_id: {}", id.to_ascii_uppercase()),
        };
        add("uuid", text);
    }
    for i in 0..30 {
        let digest = rng.token(64, HEX);
        let text = match i % 3 {
            0 => format!("sha256:{digest}"),
            1 => format!("{digest}  target/release/chapters"),
            _ => format!("{{\"digest\": \"sha256:{digest}\", \"size\": 1234}}"),
        };
        add("sha256", text);
    }
    for i in 0..20 {
        let data = format!("iVBORw0KGgoAAAANSUhEUgAA{}", rng.token(600 + i * 37, B64));
        let text = if i % 2 == 0 {
            format!("![screenshot](data:image/png;base64,{data}=)")
        } else {
            format!("{{\"type\":\"image\",\"source\":{{\"type\":\"base64\",\"media_type\":\"image/png\",\"data\":\"{data}==\"}}}}")
        };
        add("base64_image", text);
    }
    for text in [
        "AbstractSingletonProxyFactoryBean",
        "test_redaction_corpus_recall_is_high_for_every_kind",
        "tokenizer_config_for_multilingual_models",
        "PASSWORD_RESET_TOKEN_TTL_SECONDS = 3600",
        "fn get_api_key_from_environment() -> Option<String>",
        "SecretAccessKeyRotationPolicy",
        "secret_access_key_rotation_days = 90",
        "GithubPatExpiryNotificationService",
        "skip-worktree-and-assume-unchanged",
        "task-list-item-checkbox-disabled",
        "risk-based-authentication-strategy",
        "AuthorizationHeaderMissingException",
        "authorization_server_metadata_url",
        "bearer_token_refresh_interval_seconds",
        "xoxo-hugs-and-kisses",
        "hf_hub_download(repo_id='bert-base-uncased')",
        "npm_config_registry",
        "SG.Main.Window",
        "AIzaSy (the prefix of a Google key)",
        "eyJ is how base64 of {\" starts",
        "sk-learn-compatible-estimator",
        "key-value-store-implementation",
        "dckr_ is Docker's token prefix",
        "shp is a Shopify prefix",
        "the do_v1_ prefix",
        "MyServiceAccountPrivateKeyLoader",
        "ACCESS_CONTROL_ALLOW_ORIGIN",
        "SKIP_PREFLIGHT_CHECK=true",
        "ACKNOWLEDGEMENT_TIMEOUT_MS=5000",
        "mysql -u root -p",
        "mysql --protocol=tcp -h db -u app -p shop",
    ] {
        add("long_identifier", text.to_owned());
    }
    for text in [
        "API_KEY=YOUR_API_KEY",
        "export OPENAI_API_KEY=<your-api-key>",
        "password: <PASSWORD>",
        "\"token\": \"YOUR_TOKEN_HERE\"",
        "{\\\"token\\\": \\\"your-token-here\\\"}",
        "postgres://user:password@localhost:5432/db",
        "mysql://root:changeme@localhost/app",
        "Authorization: Bearer <token>",
        "Authorization: Bearer $TOKEN",
        "Authorization: Basic <base64(user:pass)>",
        "ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        "sk-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        "AKIAXXXXXXXXXXXXXXXX",
        "DB_PASSWORD=${DB_PASSWORD}",
        "--password=$PGPASSWORD",
        "--password \"$DB_PASS\"",
        "password: changeme",
        "SECRET_KEY=change-me",
        "SECRET=example",
        "TOKEN=REPLACE_ME",
        "aws_secret_access_key = <your secret key>",
        "xoxb-your-bot-token",
        "sk_live_...",
        "\"password\": \"********\"",
        "PASSWORD=****",
        "api_key: \"{{ vault_api_key }}\"",
        "token: ${{ secrets.GITHUB_TOKEN }}",
        "?api_key=YOUR_KEY",
        "Password=<password>;",
        "redis://:password@localhost:6379",
        "--password <password>",
        "SECRET_KEY_BASE=<generate with rails secret>",
    ] {
        add("placeholder", text.to_owned());
    }
    for text in [
        "password = getpass.getpass(\"DB password: \")",
        "token = tokens.next()",
        "sorted(xs, key=len)",
        "the bearer token expires after an hour",
        "Rotate the API key weekly and never commit a token.",
        "if password == confirm:",
        "pub password: String,",
        "password: Optional[str] = None",
        "token: Option<Token>,",
        "\"max_tokens\": 4096",
        "\"input_tokens\": 1532, \"output_tokens\": 210",
        "password_hash: argon2id",
        "see https://github.com/org/repo/pull/42#issuecomment-1",
        "GET /v1/items?page=2&sort=desc&limit=50",
        "secret = Secret::new(password.clone());",
        "let api_key = std::env::var(\"API_KEY\")?;",
        "api_key = os.environ[\"API_KEY\"]",
        "password = request.POST.get('password')",
        "headers = {\"Authorization\": f\"Bearer {token}\"}",
        "Authorization header is missing",
        "the password: it must be at least 12 characters",
        "token: str",
        "private_key = load_pem(path)",
        "secret_key: &[u8],",
        "\"token_count\": 12",
        "TOKEN_LIMIT=8000",
        "--password-file /run/secrets/db",
        "-p 8080:80",
        "docker run -p 5432:5432 postgres",
        "https://hooks.slack.com/services/",
        "Bearer tokens are described in RFC 6750",
        "bEaReR of this letter: the courier",
        "BeArEr authentication, described in RFC 6750",
        "the renderer_for_markdown_documents_v2",
        "a clearer abcdefghijklmnopqrstuv",
        "bearer abcdefghijklmnop",
        "bearer_authentication_is_enabled",
        "UnbEaReR tokens_are_never_logged",
    ] {
        add("code_or_prose", text.to_owned());
    }
    out
}
