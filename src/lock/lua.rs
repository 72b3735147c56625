//! The scripts as redlock sends them: `EVALSHA` by a SHA-1 computed when redlock is compiled,
//! and, when the server does not know the script (after a restart or `SCRIPT FLUSH`), `SCRIPT
//! LOAD` and `EVALSHA` again, as the redis crate's `Script` does. That type hashes its source
//! when first used: the acquire and release scripts are 24 KB, and hashing them at every start
//! was work the compiler can do once (see docs/performance.md).

use redis::{ConnectionLike, FromRedisValue, RedisResult, ToRedisArgs};

/// One script: its source and the hex SHA-1 of it.
pub struct Lua {
    code: &'static str,
    hash: &'static str,
}

/// `Lua` for a source known at compile time, hashed then.
macro_rules! lua {
    ($code:expr) => {{
        const HEX: [u8; 40] = $crate::lock::lua::sha1_hex($code.as_bytes());
        $crate::lock::lua::Lua::hashed($code, &HEX)
    }};
}
pub(crate) use lua;

impl Lua {
    /// Use [`lua!`]: `hex` must be the SHA-1 of `code`.
    pub const fn hashed(code: &'static str, hex: &'static [u8; 40]) -> Lua {
        let Ok(hash) = std::str::from_utf8(hex) else {
            panic!("a hex digest is ASCII")
        };
        Lua { code, hash }
    }

    pub fn get_hash(&self) -> &'static str {
        self.hash
    }

    /// `SCRIPT LOAD`.
    pub fn load(&self, con: &mut dyn ConnectionLike) -> RedisResult<()> {
        redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(self.code)
            .query::<String>(con)
            .map(drop)
    }

    /// An invocation with its first key.
    pub fn key<T: ToRedisArgs>(&self, key: T) -> Invocation<'_> {
        let mut call = self.prepare_invoke();
        call.key(key);
        call
    }

    pub fn prepare_invoke(&self) -> Invocation<'_> {
        Invocation {
            script: self,
            keys: Vec::new(),
            args: Vec::new(),
        }
    }
}

/// A script with its keys and arguments, as the redis crate's `ScriptInvocation`.
pub struct Invocation<'a> {
    script: &'a Lua,
    keys: Vec<Vec<u8>>,
    args: Vec<Vec<u8>>,
}

impl Invocation<'_> {
    pub fn key<T: ToRedisArgs>(&mut self, key: T) -> &mut Self {
        self.keys.extend(key.to_redis_args());
        self
    }

    pub fn arg<T: ToRedisArgs>(&mut self, arg: T) -> &mut Self {
        self.args.extend(arg.to_redis_args());
        self
    }

    /// One call of `each` (a script made by `scripts::each!`) that makes every one of `calls`
    /// (invocations of the script it wraps, one per lock) in one round trip: the keys of all of
    /// them, and their arguments behind their counts (see `scripts/each.lua`). Its reply is
    /// each call's reply, in order.
    pub fn each<'b>(each: &'b Lua, calls: &[Invocation<'_>]) -> Invocation<'b> {
        let mut all = each.prepare_invoke();
        all.args.push(calls.len().to_string().into_bytes());
        for call in calls {
            all.keys.extend(call.keys.iter().cloned());
            all.args.push(call.keys.len().to_string().into_bytes());
            all.args.push(call.args.len().to_string().into_bytes());
            all.args.extend(call.args.iter().cloned());
        }
        all
    }

    /// `EVALSHA`; after NOSCRIPT, the script is loaded and called again.
    pub fn invoke<T: FromRedisValue>(&self, con: &mut dyn ConnectionLike) -> RedisResult<T> {
        let mut eval = redis::cmd("EVALSHA");
        eval.arg(self.script.hash)
            .arg(self.keys.len())
            .arg(&self.keys)
            .arg(&self.args);
        match eval.query(con) {
            Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
                self.script.load(con)?;
                eval.query(con)
            }
            other => other,
        }
    }

    /// `EVALSHA` and `then` behind it, in one round trip on one connection (a cluster routes
    /// the two by the script's first key, to one node); after NOSCRIPT, the script is loaded
    /// and both are sent again. The script's reply, and `then`'s as it came: an error reply
    /// there is the server's refusal of `then` alone. (Through a cluster the router turns an
    /// error reply to either into the error of both.)
    pub fn invoke_then<T: FromRedisValue>(
        &self,
        con: &mut dyn ConnectionLike,
        then: &redis::Cmd,
    ) -> RedisResult<(T, RedisResult<redis::Value>)> {
        let mut eval = redis::cmd("EVALSHA");
        eval.arg(self.script.hash)
            .arg(self.keys.len())
            .arg(&self.keys)
            .arg(&self.args);
        let mut pipe = redis::pipe();
        pipe.add_command(eval).add_command(then.clone());
        let packed = pipe.get_packed_pipeline();
        let is_noscript = |e: &redis::RedisError| {
            e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
        };
        let mut replies = match con.req_packed_commands(&packed, 0, 2) {
            Ok(replies)
                if matches!(replies.first(), Some(redis::Value::ServerError(e))
                    if is_noscript(&redis::RedisError::from(e.clone()))) =>
            {
                self.script.load(con)?;
                con.req_packed_commands(&packed, 0, 2)?
            }
            Err(e) if is_noscript(&e) => {
                self.script.load(con)?;
                con.req_packed_commands(&packed, 0, 2)?
            }
            other => other?,
        };
        let reply = |value: redis::Value| match value {
            redis::Value::ServerError(e) => Err(redis::RedisError::from(e)),
            value => Ok(value),
        };
        let then_reply = reply(replies.pop().unwrap_or(redis::Value::Nil));
        let script = reply(replies.pop().unwrap_or(redis::Value::Nil))?;
        Ok((redis::from_redis_value(script)?, then_reply))
    }
}

/// The SHA-1 of `data` in lower-case hex (FIPS 180-4), at compile time.
pub const fn sha1_hex(data: &[u8]) -> [u8; 40] {
    let h = sha1(data);
    let digits = b"0123456789abcdef";
    let mut hex = [0u8; 40];
    let mut i = 0;
    while i < 40 {
        let nibble = (h[i / 8] >> (28 - 4 * (i % 8))) & 0xf;
        hex[i] = digits[nibble as usize];
        i += 1;
    }
    hex
}

const fn sha1(data: &[u8]) -> [u32; 5] {
    let mut h: [u32; 5] = [
        0x6745_2301,
        0xEFCD_AB89,
        0x98BA_DCFE,
        0x1032_5476,
        0xC3D2_E1F0,
    ];
    // The message, a 1 bit, zeros, and its length in bits as 8 bytes: whole 64-byte blocks.
    let padded = (data.len() + 9).div_ceil(64) * 64;
    let mut block = 0;
    while block < padded / 64 {
        let mut w = [0u32; 80];
        let mut t = 0;
        while t < 16 {
            let mut k = 0;
            while k < 4 {
                w[t] = (w[t] << 8) | padded_byte(data, block * 64 + t * 4 + k, padded) as u32;
                k += 1;
            }
            t += 1;
        }
        while t < 80 {
            w[t] = (w[t - 3] ^ w[t - 8] ^ w[t - 14] ^ w[t - 16]).rotate_left(1);
            t += 1;
        }
        let (mut a, mut b, mut c, mut d, mut e) = (h[0], h[1], h[2], h[3], h[4]);
        t = 0;
        while t < 80 {
            let (f, k) = match t / 20 {
                0 => ((b & c) | (!b & d), 0x5A82_7999),
                1 => (b ^ c ^ d, 0x6ED9_EBA1),
                2 => ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC),
                _ => (b ^ c ^ d, 0xCA62_C1D6),
            };
            let next = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(k)
                .wrapping_add(w[t]);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = next;
            t += 1;
        }
        h[0] = h[0].wrapping_add(a);
        h[1] = h[1].wrapping_add(b);
        h[2] = h[2].wrapping_add(c);
        h[3] = h[3].wrapping_add(d);
        h[4] = h[4].wrapping_add(e);
        block += 1;
    }
    h
}

/// Byte `i` of the padded message of `padded` bytes.
const fn padded_byte(data: &[u8], i: usize, padded: usize) -> u8 {
    if i < data.len() {
        data[i]
    } else if i == data.len() {
        0x80
    } else if i >= padded - 8 {
        ((data.len() as u64 * 8) >> ((padded - 1 - i) * 8)) as u8
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_compile_time_hashes_are_sha1s() {
        for (name, code) in crate::lock::scripts::ALL {
            let ours = sha1_hex(code.as_bytes());
            assert_eq!(
                std::str::from_utf8(&ours).unwrap(),
                sha1_smol::Sha1::from(code).digest().to_string(),
                "{name}"
            );
        }
    }

    #[test]
    fn known_digests() {
        for (data, hex) in [
            ("", "da39a3ee5e6b4b0d3255bfef95601890afd80709"),
            ("abc", "a9993e364706816aba3e25717850c26c9cd0d89d"),
            (
                "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
                "84983e441c3bd26ebaae4aa1f95129e5e54670f1",
            ),
        ] {
            assert_eq!(&sha1_hex(data.as_bytes()), hex.as_bytes(), "{data:?}");
        }
        // Every length around a block's edge.
        for len in 50..140 {
            let data = vec![b'x'; len];
            let ours = sha1_hex(&data);
            let code = String::from_utf8(data).unwrap();
            assert_eq!(
                std::str::from_utf8(&ours).unwrap(),
                sha1_smol::Sha1::from(&code).digest().to_string(),
                "{len}"
            );
        }
    }
}
