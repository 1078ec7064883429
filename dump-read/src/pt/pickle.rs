//! A pickle interpreter for the subset `torch.save` writes for a plain tensor: the
//! `data.pkl` of a `.pt` archive. It builds no Python objects: it follows the opcodes far
//! enough to learn the tensor's storage (persistent id), dtype, offset, size and stride, and
//! refuses everything else with the opcode or global it met.
//!
//! Hard limits keep a hostile file cheap: the pickle is at most [`MAX_PICKLE`] bytes (checked
//! by the caller), at most [`MAX_OPS`] opcodes run, the memo holds at most [`MAX_MEMO`]
//! entries, the stack [`MAX_STACK`] values, containers nest at most [`MAX_DEPTH`] deep and
//! hold [`MAX_ITEMS`] items in all. Values are shared (`Rc`), never deep-copied, so a memo
//! entry fetched many times costs nothing.

use std::rc::Rc;

use dump_core::DType;

/// Largest `data.pkl` read.
pub(crate) const MAX_PICKLE: u64 = 1 << 20;
/// Opcodes run at most.
pub(crate) const MAX_OPS: usize = 100_000;
/// Memo entries at most.
pub(crate) const MAX_MEMO: usize = 10_000;
/// Stack values at most.
pub(crate) const MAX_STACK: usize = 10_000;
/// Nesting of tuples, lists and dicts at most.
pub(crate) const MAX_DEPTH: u32 = 32;
/// Items in all containers together at most.
pub(crate) const MAX_ITEMS: usize = 100_000;
/// Dimensions of a tensor at most.
pub(crate) const MAX_DIMS: usize = 32;

/// What `data.pkl` says of the tensor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TensorMeta {
    /// The storage's key: its record is `{prefix}/data/{key}`.
    pub(crate) key: String,
    /// Element type, from the storage class (`torch.FloatStorage`).
    pub(crate) dtype: DType,
    /// Elements the storage holds.
    pub(crate) storage_elems: u64,
    /// First element of the tensor in the storage.
    pub(crate) offset: u64,
    /// Dimensions.
    pub(crate) shape: Vec<usize>,
    /// Strides in elements.
    pub(crate) stride: Vec<i64>,
}

#[derive(Clone, Debug)]
enum Value {
    None,
    Bool(bool),
    Int(i64),
    Float,
    Str(Rc<str>),
    Global(Rc<(String, String)>),
    Seq(Rc<Seq>),
    Dict(Rc<Seq>),
    Storage(Rc<(String, DType, u64)>),
    Tensor(Rc<TensorMeta>),
}

#[derive(Clone, Debug)]
struct Seq {
    items: Vec<Value>,
    depth: u32,
}

impl Value {
    fn depth(&self) -> u32 {
        match self {
            Value::Seq(s) | Value::Dict(s) => s.depth,
            _ => 0,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Value::None => "None",
            Value::Bool(_) => "a bool",
            Value::Int(_) => "an int",
            Value::Float => "a float",
            Value::Str(_) => "a string",
            Value::Global(_) => "a global",
            Value::Seq(_) => "a tuple or list",
            Value::Dict(_) => "a dict",
            Value::Storage(_) => "a storage",
            Value::Tensor(_) => "a tensor",
        }
    }
}

/// The storage classes torch.save names, and their element types.
fn storage_dtype(name: &str) -> Option<DType> {
    Some(match name {
        "FloatStorage" => DType::Float32,
        "DoubleStorage" => DType::Float64,
        "HalfStorage" => DType::Float16,
        "BFloat16Storage" => DType::BFloat16,
        "LongStorage" => DType::Int64,
        "IntStorage" => DType::Int32,
        "ShortStorage" => DType::Int16,
        "CharStorage" => DType::Int8,
        "ByteStorage" => DType::UInt8,
        "BoolStorage" => DType::Bool,
        _ => return None,
    })
}

/// The globals the subset allows (anything else is refused when it is named).
fn allowed_global(module: &str, name: &str) -> bool {
    matches!(
        (module, name),
        ("torch._utils", "_rebuild_tensor_v2")
            | ("torch._utils", "_rebuild_parameter")
            | ("collections", "OrderedDict")
    ) || (module == "torch" && storage_dtype(name).is_some())
}

struct Machine<'a> {
    data: &'a [u8],
    pos: usize,
    stack: Vec<Value>,
    marks: Vec<usize>,
    memo: std::collections::HashMap<u32, Value>,
    items: usize,
}

type R<T> = Result<T, String>;

impl<'a> Machine<'a> {
    fn take(&mut self, n: usize) -> R<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.data.len());
        let Some(end) = end else {
            return Err(format!(
                "ends inside an argument at byte {} ({n} bytes needed, {} left)",
                self.pos,
                self.data.len() - self.pos
            ));
        };
        let s = &self.data[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn u8(&mut self) -> R<u8> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> R<u16> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> R<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn line(&mut self) -> R<&'a str> {
        let rest = &self.data[self.pos..];
        let n = rest
            .iter()
            .take(256)
            .position(|&b| b == b'\n')
            .ok_or_else(|| format!("GLOBAL at byte {}: no newline within 256 bytes", self.pos))?;
        let s = std::str::from_utf8(&rest[..n])
            .map_err(|_| format!("GLOBAL at byte {}: not UTF-8", self.pos))?;
        self.pos += n + 1;
        Ok(s)
    }

    fn text(&mut self, n: usize) -> R<Value> {
        let at = self.pos;
        let b = self.take(n)?;
        let s = std::str::from_utf8(b).map_err(|_| format!("string at byte {at}: not UTF-8"))?;
        Ok(Value::Str(s.into()))
    }

    fn push(&mut self, v: Value) -> R<()> {
        if self.stack.len() >= MAX_STACK {
            return Err(format!("more than {MAX_STACK} values on the stack"));
        }
        self.stack.push(v);
        Ok(())
    }

    fn pop(&mut self, op: &str) -> R<Value> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() <= floor {
            return Err(format!("{op} at byte {}: the stack is empty", self.pos));
        }
        Ok(self.stack.pop().expect("checked"))
    }

    fn pop_mark(&mut self, op: &str) -> R<Vec<Value>> {
        let m = self
            .marks
            .pop()
            .ok_or_else(|| format!("{op} at byte {}: no MARK", self.pos))?;
        Ok(self.stack.split_off(m))
    }

    fn seq(&mut self, items: Vec<Value>) -> R<Rc<Seq>> {
        self.items += items.len();
        if self.items > MAX_ITEMS {
            return Err(format!("more than {MAX_ITEMS} container items"));
        }
        let depth = 1 + items.iter().map(Value::depth).max().unwrap_or(0);
        if depth > MAX_DEPTH {
            return Err(format!("containers nest more than {MAX_DEPTH} deep"));
        }
        Ok(Rc::new(Seq { items, depth }))
    }

    /// Appends `more` to the list on top of the stack (copy on write: lists are only built,
    /// never shared while they grow, in what torch.save writes).
    fn extend_top(&mut self, more: Vec<Value>, op: &str, dict: bool) -> R<()> {
        let top = self.pop(op)?;
        let mut items = match (&top, dict) {
            (Value::Seq(s), false) | (Value::Dict(s), true) => s.items.clone(),
            _ => {
                return Err(format!(
                    "{op} at byte {} onto {}, not a {}",
                    self.pos,
                    top.kind(),
                    if dict { "dict" } else { "list" }
                ));
            }
        };
        if dict && !more.len().is_multiple_of(2) {
            return Err(format!("{op} at byte {}: an odd number of items", self.pos));
        }
        items.extend(more);
        let s = self.seq(items)?;
        self.push(if dict { Value::Dict(s) } else { Value::Seq(s) })
    }

    fn memo_put(&mut self, key: u32) -> R<()> {
        let v = self
            .stack
            .last()
            .cloned()
            .ok_or_else(|| format!("PUT at byte {}: the stack is empty", self.pos))?;
        if self.memo.len() >= MAX_MEMO && !self.memo.contains_key(&key) {
            return Err(format!("more than {MAX_MEMO} memo entries"));
        }
        self.memo.insert(key, v);
        Ok(())
    }

    fn memo_get(&mut self, key: u32) -> R<()> {
        let v = self
            .memo
            .get(&key)
            .cloned()
            .ok_or_else(|| format!("GET at byte {}: memo key {key} was never put", self.pos))?;
        self.push(v)
    }
}

fn int(v: &Value, what: &str) -> R<i64> {
    match v {
        Value::Int(i) => Ok(*i),
        Value::Bool(b) => Ok(*b as i64),
        other => Err(format!("{what} is {}, not an int", other.kind())),
    }
}

fn ints(v: &Value, what: &str) -> R<Vec<i64>> {
    match v {
        Value::Seq(s) => {
            if s.items.len() > MAX_DIMS {
                return Err(format!(
                    "{what} has {} dimensions, more than {MAX_DIMS}",
                    s.items.len()
                ));
            }
            s.items.iter().map(|x| int(x, what)).collect()
        }
        other => Err(format!("{what} is {}, not a tuple of ints", other.kind())),
    }
}

/// `persistent_load(('storage', torch.XStorage, key, location, numel))`.
fn storage(pid: &Value) -> R<Value> {
    let Value::Seq(s) = pid else {
        return Err(format!(
            "persistent id is {}, not a ('storage', type, key, location, numel) tuple",
            pid.kind()
        ));
    };
    let items = &s.items;
    match items.as_slice() {
        [
            Value::Str(tag),
            Value::Global(g),
            Value::Str(key),
            Value::Str(_),
            numel,
        ] if &**tag == "storage" => {
            let dtype = storage_dtype(&g.1).filter(|_| g.0 == "torch").ok_or_else(|| {
                format!(
                    "storage type {}.{} is not one opdump reads (Float, Double, Half, BFloat16, Long, Int, Short, Char, Byte, Bool)",
                    g.0, g.1
                )
            })?;
            if key.is_empty()
                || key.len() > 64
                || !key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            {
                return Err(format!(
                    "storage key {key:?} is not a short name of letters, digits and '_'"
                ));
            }
            let n = int(numel, "the storage's element count")?;
            let n = u64::try_from(n)
                .map_err(|_| format!("the storage's element count {n} is negative"))?;
            Ok(Value::Storage(Rc::new((key.to_string(), dtype, n))))
        }
        _ => Err(format!(
            "persistent id of {} items is not a ('storage', torch.XStorage, key, location, numel) tuple",
            items.len()
        )),
    }
}

/// `_rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks[, metadata])`.
fn rebuild_tensor(args: &[Value]) -> R<Value> {
    if !(6..=7).contains(&args.len()) {
        return Err(format!(
            "_rebuild_tensor_v2 called with {} arguments, expected 6 or 7",
            args.len()
        ));
    }
    let Value::Storage(st) = &args[0] else {
        return Err(format!(
            "_rebuild_tensor_v2's storage is {}, not a storage",
            args[0].kind()
        ));
    };
    let offset = int(&args[1], "the storage offset")?;
    let offset =
        u64::try_from(offset).map_err(|_| format!("the storage offset {offset} is negative"))?;
    let shape = ints(&args[2], "the size")?
        .into_iter()
        .map(|d| usize::try_from(d).map_err(|_| format!("the size has a negative dimension {d}")))
        .collect::<R<Vec<usize>>>()?;
    let stride = ints(&args[3], "the stride")?;
    if stride.len() != shape.len() {
        return Err(format!(
            "the stride has {} dimensions, the size {}",
            stride.len(),
            shape.len()
        ));
    }
    Ok(Value::Tensor(Rc::new(TensorMeta {
        key: st.0.clone(),
        dtype: st.1,
        storage_elems: st.2,
        offset,
        shape,
        stride,
    })))
}

fn reduce(callable: &Value, args: &Value) -> R<Value> {
    let Value::Global(g) = callable else {
        return Err(format!("REDUCE calls {}, not a global", callable.kind()));
    };
    let Value::Seq(a) = args else {
        return Err(format!(
            "REDUCE's arguments are {}, not a tuple",
            args.kind()
        ));
    };
    match (g.0.as_str(), g.1.as_str()) {
        ("torch._utils", "_rebuild_tensor_v2") => rebuild_tensor(&a.items),
        ("torch._utils", "_rebuild_parameter") => match a.items.first() {
            Some(t @ Value::Tensor(_)) => Ok(t.clone()),
            _ => Err("_rebuild_parameter's first argument is not a tensor".into()),
        },
        ("collections", "OrderedDict") if a.items.is_empty() => Ok(Value::Dict(Rc::new(Seq {
            items: Vec::new(),
            depth: 1,
        }))),
        (m, n) => Err(format!(
            "REDUCE calls {m}.{n} with these arguments, which opdump does not read"
        )),
    }
}

/// Runs `data` (a whole `data.pkl`) and returns the tensor it builds. Errors say what was
/// met and where (byte offset), and what the subset allows.
pub(crate) fn tensor_of(data: &[u8]) -> Result<TensorMeta, String> {
    let mut m = Machine {
        data,
        pos: 0,
        stack: Vec::new(),
        marks: Vec::new(),
        memo: std::collections::HashMap::new(),
        items: 0,
    };
    for _ in 0..MAX_OPS {
        let at = m.pos;
        let op = m
            .u8()
            .map_err(|_| format!("ends at byte {at} without STOP"))?;
        match op {
            0x80 => {
                let p = m.u8()?;
                if p > 5 {
                    return Err(format!("pickle protocol {p} (at most 5 is read)"));
                }
            }
            0x95 => {
                m.take(8)?;
            }
            b'.' => {
                let top = m.pop("STOP")?;
                return match top {
                    Value::Tensor(t) => Ok((*t).clone()),
                    other => Err(format!(
                        "holds {}, not a tensor (opdump reads files of one plain tensor, as torch.save(tensor) writes them)",
                        other.kind()
                    )),
                };
            }
            b'(' => {
                if m.marks.len() >= MAX_STACK {
                    return Err(format!("more than {MAX_STACK} marks"));
                }
                m.marks.push(m.stack.len());
            }
            b')' => {
                let s = m.seq(Vec::new())?;
                m.push(Value::Seq(s))?;
            }
            b't' | b'l' => {
                let items = m.pop_mark("TUPLE")?;
                let s = m.seq(items)?;
                m.push(Value::Seq(s))?;
            }
            0x85..=0x87 => {
                let n = (op - 0x84) as usize;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(m.pop("TUPLE")?);
                }
                items.reverse();
                let s = m.seq(items)?;
                m.push(Value::Seq(s))?;
            }
            b']' => {
                let s = m.seq(Vec::new())?;
                m.push(Value::Seq(s))?;
            }
            b'a' => {
                let v = m.pop("APPEND")?;
                m.extend_top(vec![v], "APPEND", false)?;
            }
            b'e' => {
                let items = m.pop_mark("APPENDS")?;
                m.extend_top(items, "APPENDS", false)?;
            }
            b'}' => {
                let s = m.seq(Vec::new())?;
                m.push(Value::Dict(s))?;
            }
            b'd' => {
                let items = m.pop_mark("DICT")?;
                if !items.len().is_multiple_of(2) {
                    return Err(format!("DICT at byte {at}: an odd number of items"));
                }
                let s = m.seq(items)?;
                m.push(Value::Dict(s))?;
            }
            b's' => {
                let v = m.pop("SETITEM")?;
                let k = m.pop("SETITEM")?;
                m.extend_top(vec![k, v], "SETITEM", true)?;
            }
            b'u' => {
                let items = m.pop_mark("SETITEMS")?;
                m.extend_top(items, "SETITEMS", true)?;
            }
            b'N' => m.push(Value::None)?,
            0x88 => m.push(Value::Bool(true))?,
            0x89 => m.push(Value::Bool(false))?,
            b'J' => {
                let v = m.u32()? as i32;
                m.push(Value::Int(v as i64))?;
            }
            b'K' => {
                let v = m.u8()?;
                m.push(Value::Int(v as i64))?;
            }
            b'M' => {
                let v = m.u16()?;
                m.push(Value::Int(v as i64))?;
            }
            0x8a => {
                let n = m.u8()? as usize;
                if n > 8 {
                    return Err(format!("LONG1 at byte {at}: {n} bytes, more than an i64"));
                }
                let b = m.take(n)?;
                let mut v: i64 = 0;
                for (i, &x) in b.iter().enumerate() {
                    v |= (x as i64) << (8 * i);
                }
                if n > 0 && n < 8 && b[n - 1] & 0x80 != 0 {
                    v -= 1i64 << (8 * n);
                }
                m.push(Value::Int(v))?;
            }
            b'G' => {
                m.take(8)?;
                m.push(Value::Float)?;
            }
            b'X' => {
                let n = m.u32()? as usize;
                let v = m.text(n)?;
                m.push(v)?;
            }
            0x8c => {
                let n = m.u8()? as usize;
                let v = m.text(n)?;
                m.push(v)?;
            }
            b'c' => {
                let module = m.line()?.to_owned();
                let name = m.line()?.to_owned();
                if !allowed_global(&module, &name) {
                    return Err(format!(
                        "names the global {module}.{name}; opdump reads plain tensors only (torch._utils._rebuild_tensor_v2, torch.*Storage, collections.OrderedDict)"
                    ));
                }
                m.push(Value::Global(Rc::new((module, name))))?;
            }
            0x93 => {
                let name = m.pop("STACK_GLOBAL")?;
                let module = m.pop("STACK_GLOBAL")?;
                let (Value::Str(module), Value::Str(name)) = (module, name) else {
                    return Err(format!(
                        "STACK_GLOBAL at byte {at}: module and name are not strings"
                    ));
                };
                if !allowed_global(&module, &name) {
                    return Err(format!(
                        "names the global {module}.{name}; opdump reads plain tensors only (torch._utils._rebuild_tensor_v2, torch.*Storage, collections.OrderedDict)"
                    ));
                }
                m.push(Value::Global(Rc::new((
                    module.to_string(),
                    name.to_string(),
                ))))?;
            }
            b'q' => {
                let k = m.u8()? as u32;
                m.memo_put(k)?;
            }
            b'r' => {
                let k = m.u32()?;
                m.memo_put(k)?;
            }
            0x94 => {
                let k = m.memo.len() as u32;
                m.memo_put(k)?;
            }
            b'h' => {
                let k = m.u8()? as u32;
                m.memo_get(k)?;
            }
            b'j' => {
                let k = m.u32()?;
                m.memo_get(k)?;
            }
            b'Q' => {
                let pid = m.pop("BINPERSID")?;
                let v = storage(&pid).map_err(|e| format!("BINPERSID at byte {at}: {e}"))?;
                m.push(v)?;
            }
            b'R' => {
                let args = m.pop("REDUCE")?;
                let callable = m.pop("REDUCE")?;
                let v = reduce(&callable, &args).map_err(|e| format!("at byte {at}: {e}"))?;
                m.push(v)?;
            }
            b'b' => {
                // BUILD: state set on an OrderedDict or a tensor (hooks, attributes): ignored.
                let _state = m.pop("BUILD")?;
                let obj = m.pop("BUILD")?;
                if !matches!(obj, Value::Dict(_) | Value::Tensor(_)) {
                    return Err(format!("BUILD at byte {at} on {}", obj.kind()));
                }
                m.push(obj)?;
            }
            b'0' => {
                m.pop("POP")?;
            }
            other => {
                return Err(format!(
                    "opcode 0x{other:02x} ({:?}) at byte {at} is not in the subset opdump reads (what torch.save writes for a plain tensor)",
                    other as char
                ));
            }
        }
    }
    Err(format!("more than {MAX_OPS} opcodes"))
}
