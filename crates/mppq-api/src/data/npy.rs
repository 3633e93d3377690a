//! NumPy files: `.npy` arrays and `.npz` archives to and from IR tensors (little-endian numeric
//! and bool types; C order). Writes are atomic.

use crate::error::{ApiError, Result};
use mppq_ir::{DataType, TensorData};
use std::io::Read;
use std::path::Path;

/// The dtype of a NumPy `descr` (`<f4`, `|b1`), for the dtypes mppq reads; `None` for others.
pub fn dtype_of(descr: &str) -> Option<DataType> {
    Some(match descr {
        "<f4" => DataType::Float,
        "<f8" => DataType::Double,
        "<f2" => DataType::Float16,
        "<i8" => DataType::Int64,
        "<i4" => DataType::Int32,
        "<i2" => DataType::Int16,
        "|i1" => DataType::Int8,
        "|u1" => DataType::Uint8,
        "<u2" => DataType::Uint16,
        "<u4" => DataType::Uint32,
        "<u8" => DataType::Uint64,
        "|b1" => DataType::Bool,
        _ => return None,
    })
}

/// The NumPy `descr` of a dtype (`<f4`), for the dtypes `.npy` files carry here.
pub fn descr_of(dtype: DataType) -> Option<&'static str> {
    Some(match dtype {
        DataType::Float => "<f4",
        DataType::Double => "<f8",
        DataType::Float16 => "<f2",
        DataType::Int64 => "<i8",
        DataType::Int32 => "<i4",
        DataType::Int16 => "<i2",
        DataType::Int8 => "|i1",
        DataType::Uint8 => "|u1",
        DataType::Uint16 => "<u2",
        DataType::Uint32 => "<u4",
        DataType::Uint64 => "<u8",
        DataType::Bool => "|b1",
        _ => return None,
    })
}

fn from_npy<R: Read>(file: &Path, what: &str, npy: npyz::NpyFile<R>) -> Result<TensorData> {
    let descr = npy.dtype().descr();
    let descr = descr.trim_matches('\'');
    let dtype = dtype_of(descr).ok_or_else(|| {
        ApiError::data(file, format!("{what}: unsupported dtype `{descr}` (little-endian numbers or bool)"))
    })?;
    let fortran = npy.order() == npyz::Order::Fortran;
    let shape: Vec<usize> = npy.shape().iter().map(|d| usize::try_from(*d).unwrap_or(usize::MAX)).collect();
    let count = shape.iter().try_fold(1usize, |n, d| n.checked_mul(*d));
    let expected = count.and_then(|n| dtype.packed_len(n)).ok_or_else(|| {
        ApiError::data(file, format!("{what}: shape {shape:?} is larger than any array this machine can hold"))
    })?;
    let mut bytes = Vec::new();
    let mut reader = npy.into_inner();
    reader.read_to_end(&mut bytes).map_err(|e| ApiError::data(file, format!("{what}: {e}")))?;
    if bytes.len() < expected {
        return Err(ApiError::data(file, format!("{what}: truncated data ({} of {expected} bytes)", bytes.len())));
    }
    bytes.truncate(expected);
    if fortran && shape.len() > 1 {
        // NumPy writes a column-major (e.g. transposed) array as is; we hold row-major.
        bytes = fortran_to_c(&bytes, &shape, expected / shape.iter().product::<usize>().max(1));
    }
    TensorData::from_packed(dtype, shape, bytes).map_err(|e| ApiError::data(file, format!("{what}: {e}")))
}

/// Reorders the elements (`size` bytes each) of a column-major array of `shape` to row-major.
fn fortran_to_c(bytes: &[u8], shape: &[usize], size: usize) -> Vec<u8> {
    // Column-major strides, in elements: the first axis varies fastest.
    let mut strides = vec![1usize; shape.len()];
    for axis in 1..shape.len() {
        strides[axis] = strides[axis - 1] * shape[axis - 1];
    }
    let count: usize = shape.iter().product();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = vec![0usize; shape.len()];
    for _ in 0..count {
        let at: usize = index.iter().zip(&strides).map(|(i, s)| i * s).sum::<usize>() * size;
        out.extend_from_slice(&bytes[at..at + size]);
        // Next row-major index: the last axis varies fastest.
        for axis in (0..shape.len()).rev() {
            index[axis] += 1;
            if index[axis] < shape[axis] {
                break;
            }
            index[axis] = 0;
        }
    }
    out
}

/// Checks an `.npy` header before the parser sees it: the length it claims against the bytes
/// the file has (a 20-byte file may claim a 4 GiB header), and that the header is a flat Python
/// dict (`{'descr': …, 'fortran_order': …, 'shape': (…), }`). The parser backtracks
/// exponentially on deeply nested brackets: a 300-byte header of `[[[[…` took minutes.
fn check_header(path: &Path, bytes: &[u8]) -> Result<()> {
    let (start, claimed): (usize, _) = match (bytes.get(..6), bytes.get(6)) {
        (Some(b"\x93NUMPY"), Some(1)) => (10, bytes.get(8..10).map(|b| u16::from_le_bytes([b[0], b[1]]) as usize)),
        (Some(b"\x93NUMPY"), Some(2 | 3)) => {
            (12, bytes.get(8..12).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize))
        }
        _ => return Ok(()), // not an .npy header the parser accepts: it says what is wrong
    };
    let claimed = claimed.ok_or_else(|| ApiError::data(path, "not a .npy file: truncated header"))?;
    let Some(header) = bytes.get(start..start.saturating_add(claimed)) else {
        return Err(ApiError::data(
            path,
            format!("not a .npy file: its header claims {claimed} bytes, the whole file has {}", bytes.len()),
        ));
    };
    let not_a_dict = || {
        ApiError::data(path, "not a .npy file: its header is not a dict of descr, fortran_order and shape".to_string())
    };
    if header.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(not_a_dict());
    }
    let mut depth = 0usize;
    for b in header {
        match b {
            b'{' | b'(' | b'[' => depth += 1,
            b'}' | b')' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        // dict → shape tuple is 2; a structured dtype's list of tuples would be 4.
        if depth > MAX_HEADER_NESTING {
            return Err(not_a_dict());
        }
    }
    Ok(())
}

/// Deepest bracket nesting an `.npy` header may have.
const MAX_HEADER_NESTING: usize = 4;

/// Reads one `.npy` array.
pub fn read_npy(path: &Path) -> Result<TensorData> {
    let bytes = std::fs::read(path).map_err(|source| ApiError::Io { path: path.display().to_string(), source })?;
    check_header(path, &bytes)?;
    let npy =
        npyz::NpyFile::new(bytes.as_slice()).map_err(|e| ApiError::data(path, format!("not a .npy file: {e}")))?;
    from_npy(path, "array", npy)
}

/// Reads every array of an `.npz` archive, sorted by name. Each member is read whole (its
/// declared size checked against the tensor budget first: a small archive can inflate to
/// gigabytes) and its header checked as an `.npy` file's is.
pub fn read_npz(path: &Path) -> Result<Vec<(String, TensorData)>> {
    let mut archive =
        npyz::npz::NpzArchive::open(path).map_err(|e| ApiError::data(path, format!("not a .npz archive: {e}")))?;
    // The archive lists its members in no stable order: sort them, so reads are deterministic.
    let mut names: Vec<String> = archive.array_names().map(str::to_string).collect();
    names.sort();
    let mut arrays = Vec::with_capacity(names.len());
    for name in names {
        let what = format!("array `{name}`");
        let mut member = archive
            .zip_archive()
            .by_name(&npyz::npz::file_name_from_array_name(&name))
            .map_err(|e| ApiError::data(path, format!("{what}: {e}")))?;
        let size = member.size();
        let budget = mppq_exec::budget::max_tensor_bytes();
        if size > budget {
            return Err(ApiError::data(
                path,
                format!("{what} inflates to {} MiB, over the {} MiB one tensor may take", size >> 20, budget >> 20),
            ));
        }
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        (&mut member).take(size).read_to_end(&mut bytes).map_err(|e| ApiError::data(path, format!("{what}: {e}")))?;
        check_header(path, &bytes)?;
        let npy = npyz::NpyFile::new(bytes.as_slice()).map_err(|e| ApiError::data(path, format!("{what}: {e}")))?;
        arrays.push((name.clone(), from_npy(path, &what, npy)?));
    }
    Ok(arrays)
}

/// Writes an `.npy` file atomically (temporary file, then rename).
pub fn write_npy(path: &Path, tensor: &TensorData) -> Result<()> {
    let io = |source| ApiError::Io { path: path.display().to_string(), source };
    let descr = descr_of(tensor.dtype())
        .ok_or_else(|| ApiError::data(path, format!("{} tensors cannot be written as .npy", tensor.dtype())))?;
    let shape: Vec<String> = tensor.shape().iter().map(|d| d.to_string()).collect();
    let shape = match shape.len() {
        1 => format!("({},)", shape[0]),
        _ => format!("({})", shape.join(", ")),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    // NPY 1.0: magic (6) + version (2) + header length (2) + header, padded to 64 bytes with '\n'.
    let total = 10 + header.len() + 1;
    header.push_str(&" ".repeat((64 - total % 64) % 64));
    header.push('\n');
    let mut bytes = Vec::with_capacity(10 + header.len() + tensor.byte_len());
    bytes.extend_from_slice(b"\x93NUMPY\x01\x00");
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(tensor.packed().unwrap_or_default());
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
    std::io::Write::write_all(&mut tmp, &bytes).map_err(io)?;
    tmp.persist(path).map_err(|e| io(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An NPY 1.0 file's bytes up to its data: magic, version, header length, `dict` padded.
    fn npy_v1(dict: &str) -> Vec<u8> {
        let mut header = dict.to_string();
        while !(10 + header.len() + 1).is_multiple_of(64) {
            header.push(' ');
        }
        header.push('\n');
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
        bytes.extend_from_slice(header.as_bytes());
        bytes
    }

    #[test]
    fn npy_round_trip_all_supported_types() {
        let dir = tempfile::tempdir().unwrap();
        let tensors = [
            TensorData::from_vec(vec![2, 3], &[1.5f32, -2.0, 3.0, 4.0, 5.0, 6.0]).unwrap(),
            TensorData::from_vec(vec![3], &[1i64, -2, 3]).unwrap(),
            TensorData::from_vec(vec![2], &[true, false]).unwrap(),
            TensorData::scalar(7u8),
        ];
        for (i, t) in tensors.iter().enumerate() {
            let p = dir.path().join(format!("{i}.npy"));
            write_npy(&p, t).unwrap();
            assert_eq!(&read_npy(&p).unwrap(), t);
        }
    }

    /// What `np.save("t.npy", np.arange(6, dtype="<f4").reshape(3, 2).T)` writes: a column-major
    /// [2, 3] array (NumPy saves a transposed array without copying it).
    #[test]
    fn fortran_order_arrays_are_read_row_major() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.npy");
        let mut bytes = npy_v1("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }");
        for v in [0f32, 1.0, 2.0, 3.0, 4.0, 5.0] {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        std::fs::write(&p, bytes).unwrap();
        let t = read_npy(&p).unwrap();
        assert_eq!(t.shape(), &[2, 3]);
        assert_eq!(t.to_f32_vec().unwrap(), vec![0.0, 2.0, 4.0, 1.0, 3.0, 5.0]);
    }

    #[test]
    fn garbage_is_a_typed_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bad.npz");
        std::fs::write(&p, b"not a zip").unwrap();
        let msg = read_npz(&p).unwrap_err().to_string();
        assert!(msg.contains("bad.npz"), "{msg}");
    }

    /// A 20-byte `.npy` whose (version 2) header length claims 4 GiB: refused before the
    /// parser allocates it (it aborted the process).
    #[test]
    fn a_header_longer_than_the_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("huge_header.npy");
        let mut bytes = b"\x93NUMPY\x02\x00".to_vec();
        bytes.extend_from_slice(&u32::MAX.to_le_bytes());
        bytes.extend_from_slice(b"{'descr'");
        std::fs::write(&p, &bytes).unwrap();
        let msg = read_npy(&p).unwrap_err().to_string();
        assert!(msg.contains("huge_header.npy") && msg.contains("claims 4294967295 bytes"), "{msg}");
    }

    /// A shape whose element count overflows is refused, not wrapped around.
    #[test]
    fn a_shape_too_large_to_hold_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("huge_shape.npy");
        let bytes = npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 16), }");
        std::fs::write(&p, &bytes).unwrap();
        let msg = read_npy(&p).unwrap_err().to_string();
        assert!(msg.contains("huge_shape.npy") && msg.contains("larger than any array"), "{msg}");
    }

    /// A header of nested brackets sent the parser into exponential backtracking (minutes for
    /// 300 bytes; found by fuzzing): refused before parsing, at once.
    #[test]
    fn a_header_that_is_not_a_flat_dict_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        for (name, dict) in [
            ("nested.npy", format!("{}{{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }}", "[".repeat(200))),
            (
                "deep.npy",
                format!(
                    "{{'descr': '<f4', 'fortran_order': False, 'shape': {}1,{}, }}",
                    "(".repeat(50),
                    ")".repeat(50)
                ),
            ),
        ] {
            let p = dir.path().join(name);
            std::fs::write(&p, npy_v1(&dict)).unwrap();
            let started = std::time::Instant::now();
            let msg = read_npy(&p).unwrap_err().to_string();
            assert!(msg.contains(name) && msg.contains("header is not a dict"), "{msg}");
            assert!(started.elapsed().as_secs() < 5);
        }
    }
}
