//! example.com/first-name: an example election strategy in Rust, with no
//! crates and no WASI (plain `rustc`, target wasm32-unknown-unknown).
//!
//! The candidate whose name sorts first leads, among those that answered
//! this round's ping; a live holder is never preempted (it keeps the lease
//! until it expires or is released). Deliberately simple: the point is the
//! ABI in Rust, with a small JSON reader that skips what it does not need.
//!
//! Build (one line, from this directory; Debian: apt-get install -y rustc libstd-rust-dev-wasm32 lld):
//!   rustc --edition 2021 --crate-type cdylib --target wasm32-unknown-unknown -C opt-level=s -C strip=symbols -o first-name.wasm first_name.rs

#[link(wasm_import_module = "lease_strategy")]
extern "C" {
    fn read_input(buf: *mut u8, limit: i32) -> i32;
    fn write_output(buf: *const u8, len: i32);
}

fn output(b: &[u8]) {
    unsafe { write_output(b.as_ptr(), b.len() as i32) }
}

#[no_mangle]
pub extern "C" fn lease_strategy_abi_version() -> i32 {
    1
}

#[no_mangle]
pub extern "C" fn lease_strategy_info() -> i32 {
    output(br#"{"name":"example.com/first-name","version":"0.1.0","description":"The acked candidate whose name sorts first leads; a live holder is never preempted."}"#);
    0
}

#[no_mangle]
pub extern "C" fn lease_strategy_decide() -> i32 {
    let n = unsafe { read_input(std::ptr::null_mut(), 0) };
    let mut buf = vec![0u8; n.max(0) as usize];
    if n < 0 || unsafe { read_input(buf.as_mut_ptr(), n) } != n {
        output(b"first-name: could not read the input");
        return 1;
    }
    match decide(&buf) {
        Ok(out) => {
            output(&out);
            0
        }
        Err(msg) => {
            output(msg.as_bytes());
            1
        }
    }
}

/// What the strategy needs of the Input; strings are raw JSON (escapes
/// kept), so they can be written back unchanged.
#[derive(Default)]
struct Facts<'a> {
    exists: bool,
    expired: bool,
    holder: &'a [u8],
    acked: Vec<&'a [u8]>,
}

fn decide(input: &[u8]) -> Result<Vec<u8>, &'static str> {
    let mut r = Reader { b: input, i: 0 };
    let mut f = Facts::default();
    r.object(|r, key| match key {
        b"lease" => r.object(|r, key| match key {
            b"exists" => r.boolean().map(|v| f.exists = v),
            b"expired" => r.boolean().map(|v| f.expired = v),
            b"holder" => r.string().map(|v| f.holder = v),
            _ => r.skip(),
        }),
        b"candidates" => r.array(|r| {
            let (mut name, mut acked): (&[u8], bool) = (b"", false);
            r.object(|r, key| match key {
                b"name" => r.string().map(|v| name = v),
                b"acked" => r.boolean().map(|v| acked = v),
                _ => r.skip(),
            })?;
            if acked {
                f.acked.push(name);
            }
            Ok(())
        }),
        _ => r.skip(),
    })?;
    r.ws();
    if r.i != input.len() {
        return Err("first-name: trailing data after the input");
    }
    // Input candidates are sorted by name already; sort anyway, bytewise,
    // so the answer does not depend on that.
    f.acked.sort_by(|a, b| a.cmp(b));
    let live = f.exists && !f.expired && !f.holder.is_empty();
    let (action, reason): (&[u8], &[u8]) = match (f.acked.first(), live) {
        (None, _) => (b"keep", b"no acked candidate"),
        (Some(_), true) => (b"keep", b"a live holder is never preempted"),
        (Some(_), false) => (b"prefer", b"the acked candidate whose name sorts first leads"),
    };
    let mut out = Vec::with_capacity(64 + 32 * f.acked.len());
    out.extend_from_slice(br#"{"ranking":["#);
    for (i, name) in f.acked.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.push(b'"');
        out.extend_from_slice(name);
        out.push(b'"');
    }
    out.extend_from_slice(br#"],"action":""#);
    out.extend_from_slice(action);
    out.extend_from_slice(br#"","preempt":false,"reason":""#);
    out.extend_from_slice(reason);
    out.extend_from_slice(b"\"}");
    Ok(out)
}

type Res<T> = Result<T, &'static str>;

/// Reader is a minimal JSON reader: objects and arrays are walked with a
/// callback per member, values the strategy does not need are skipped.
struct Reader<'a> {
    b: &'a [u8],
    i: usize,
}

const BAD: &str = "first-name: malformed input JSON";

impl<'a> Reader<'a> {
    fn ws(&mut self) {
        while self.i < self.b.len() && matches!(self.b[self.i], b' ' | b'\n' | b'\r' | b'\t') {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.b.get(self.i).copied()
    }

    fn expect(&mut self, c: u8) -> Res<()> {
        if self.peek() != Some(c) {
            return Err(BAD);
        }
        self.i += 1;
        Ok(())
    }

    fn literal(&mut self, lit: &[u8]) -> Res<()> {
        self.ws();
        if self.b[self.i..].starts_with(lit) {
            self.i += lit.len();
            Ok(())
        } else {
            Err(BAD)
        }
    }

    /// string returns the raw bytes between the quotes, escapes kept.
    fn string(&mut self) -> Res<&'a [u8]> {
        self.expect(b'"')?;
        let start = self.i;
        while self.i < self.b.len() {
            match self.b[self.i] {
                b'"' => {
                    self.i += 1;
                    return Ok(&self.b[start..self.i - 1]);
                }
                b'\\' => self.i += 2,
                c if c < 0x20 => return Err(BAD),
                _ => self.i += 1,
            }
        }
        Err(BAD)
    }

    fn boolean(&mut self) -> Res<bool> {
        match self.peek() {
            Some(b't') => self.literal(b"true").map(|_| true),
            _ => self.literal(b"false").map(|_| false),
        }
    }

    fn object(&mut self, mut member: impl FnMut(&mut Self, &'a [u8]) -> Res<()>) -> Res<()> {
        self.expect(b'{')?;
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Ok(());
        }
        loop {
            let key = self.string()?;
            self.expect(b':')?;
            member(self, key)?;
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return Err(BAD),
            }
        }
    }

    /// array walks an array; null (how Go encodes an empty list) is empty.
    fn array(&mut self, mut element: impl FnMut(&mut Self) -> Res<()>) -> Res<()> {
        if self.peek() == Some(b'n') {
            return self.literal(b"null");
        }
        self.expect(b'[')?;
        if self.peek() == Some(b']') {
            self.i += 1;
            return Ok(());
        }
        loop {
            element(self)?;
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return Err(BAD),
            }
        }
    }

    fn skip(&mut self) -> Res<()> {
        match self.peek() {
            Some(b'{') => self.object(|r, _| r.skip()),
            Some(b'[') => self.array(|r| r.skip()),
            Some(b'"') => self.string().map(|_| ()),
            Some(b't') => self.literal(b"true"),
            Some(b'f') => self.literal(b"false"),
            Some(b'n') => self.literal(b"null"),
            Some(c) if c == b'-' || c.is_ascii_digit() => {
                let start = self.i;
                while self.i < self.b.len() && matches!(self.b[self.i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9') {
                    self.i += 1;
                }
                if self.i == start {
                    Err(BAD)
                } else {
                    Ok(())
                }
            }
            _ => Err(BAD),
        }
    }
}
