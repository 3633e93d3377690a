//! Caffe's shape rules, which the converter follows to know every blob's static shape: axis
//! indexing, convolution and deconvolution output sizes, pooling's output size (ceil rounding
//! and the clipping of a last window that would start in the padding), and the output shapes of
//! Reshape (`0` and `-1`) and Flatten. Each returns a message on inputs Caffe refuses.

pub(crate) type ShapeResult<T> = std::result::Result<T, String>;

/// Caffe's `CanonicalAxisIndex`: `axis` in `-rank..rank`, negative counting from the end.
pub(crate) fn axis(axis: i64, rank: usize) -> ShapeResult<usize> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        return Err(format!("axis {axis} is out of range for a blob of rank {rank}"));
    }
    Ok(if axis < 0 { (axis + r) as usize } else { axis as usize })
}

/// Output size of a convolution along one axis (floor rounding).
pub(crate) fn conv_out(input: usize, kernel: usize, stride: usize, pad: usize, dilation: usize) -> ShapeResult<usize> {
    let extent = dilation * (kernel - 1) + 1;
    let padded = input + 2 * pad;
    if padded < extent {
        return Err(format!("kernel extent {extent} exceeds the padded input size {padded}"));
    }
    Ok((padded - extent) / stride + 1)
}

/// Output size of a deconvolution along one axis.
pub(crate) fn deconv_out(
    input: usize,
    kernel: usize,
    stride: usize,
    pad: usize,
    dilation: usize,
) -> ShapeResult<usize> {
    let full = stride
        .checked_mul(input - 1)
        .and_then(|n| n.checked_add(dilation * (kernel - 1) + 1))
        .ok_or("the deconvolution output size overflows")?;
    full.checked_sub(2 * pad)
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("padding {pad} leaves no output of the deconvolution (full size {full})"))
}

/// How Caffe rounds a pooling output size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rounding {
    Ceil,
    Floor,
}

/// Caffe's `PoolingLayer::Reshape` along one axis: `ceil` (or `floor`) of
/// `(input + 2 pad - kernel) / stride` plus one, then, when padded, one window less if the last
/// would start in the end padding. Caffe refuses `pad >= kernel`; a last window with no input
/// element (possible without padding when `stride > kernel`) is refused too, since Caffe would
/// divide by zero (AVE) or output `-FLT_MAX` (MAX) there.
pub(crate) fn pool_out(
    input: usize,
    kernel: usize,
    stride: usize,
    pad: usize,
    rounding: Rounding,
) -> ShapeResult<usize> {
    if pad >= kernel {
        return Err(format!("pad {pad} must be smaller than the kernel {kernel}"));
    }
    let padded = input + 2 * pad;
    if padded < kernel {
        return Err(format!("kernel {kernel} exceeds the padded input size {padded}"));
    }
    let span = padded - kernel;
    let mut out = match rounding {
        Rounding::Ceil => span.div_ceil(stride),
        Rounding::Floor => span / stride,
    } + 1;
    if pad > 0 && (out - 1) * stride >= input + pad {
        out -= 1;
    }
    if (out - 1) * stride >= input + pad {
        return Err(format!(
            "the last pooling window (start {} of an input of {input} padded by {pad}) holds no input element",
            (out - 1) * stride
        ));
    }
    Ok(out)
}

/// Caffe's `ReshapeLayer`: `dims` replace input axes `axis .. axis + num_axes` (`num_axes` -1:
/// to the end); a `0` copies the input's size at that place, one `-1` takes what is left.
pub(crate) fn reshape(input: &[usize], dims: &[i64], axis: i64, num_axes: i64) -> ShapeResult<Vec<usize>> {
    let rank = input.len() as i64;
    let start = if axis < 0 { axis + rank + 1 } else { axis };
    if start < 0 || start > rank {
        return Err(format!("axis {axis} is out of range for a blob of rank {rank}"));
    }
    let end = if num_axes == -1 { rank } else { start + num_axes };
    if num_axes < -1 || end > rank {
        return Err(format!("num_axes {num_axes} from axis {start} exceeds the rank {rank}"));
    }
    let (start, end) = (start as usize, end as usize);
    let mut out: Vec<usize> = input[..start].to_vec();
    let mut inferred = None;
    for (i, &d) in dims.iter().enumerate() {
        match d {
            0 => out.push(
                *input
                    .get(start + i)
                    .ok_or_else(|| format!("dim {i} is 0 (copy) but the input has no axis {}", start + i))?,
            ),
            -1 if inferred.is_none() => {
                inferred = Some(out.len());
                out.push(1);
            }
            -1 => return Err("more than one dim is -1".into()),
            d if d > 0 => out.push(d as usize),
            d => return Err(format!("dim {d} is invalid (allowed: positive, 0 to copy, one -1 to infer)")),
        }
    }
    out.extend_from_slice(&input[end..]);
    let total = count(input).ok_or("the input has too many elements")?;
    let known = count(&out).ok_or_else(|| format!("the new shape {out:?} has too many elements"))?;
    if let Some(at) = inferred {
        if known == 0 || total % known != 0 {
            return Err(format!("cannot infer the -1 dim: {total} elements do not divide by {known}"));
        }
        out[at] = total / known;
    } else if known != total {
        return Err(format!("the new shape {out:?} has {known} elements, the input {input:?} has {total}"));
    }
    Ok(out)
}

/// Number of elements of `shape`, `None` on overflow.
pub(crate) fn count(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d))
}

/// Caffe's `FlattenLayer`: axes `axis ..= end_axis` become one.
pub(crate) fn flatten(input: &[usize], start: i64, end: i64) -> ShapeResult<Vec<usize>> {
    let (s, e) = (axis(start, input.len())?, axis(end, input.len())?);
    if e < s {
        return Err(format!("end_axis {end} comes before axis {start}"));
    }
    let mut out = input[..s].to_vec();
    out.push(input[s..=e].iter().product());
    out.extend_from_slice(&input[e + 1..]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooling_rounds_up_and_clips_the_last_window() {
        // GoogLeNet's pool1: 112, kernel 3, stride 2 -> ceil(109 / 2) + 1 = 56 (floor gives 55).
        assert_eq!(pool_out(112, 3, 2, 0, Rounding::Ceil), Ok(56));
        assert_eq!(pool_out(112, 3, 2, 0, Rounding::Floor), Ok(55));
        // 5 padded by 1, kernel 2, stride 2: ceil(5/2)+1 = 4, but window 4 would start at 6 >= 5+1.
        assert_eq!(pool_out(5, 2, 2, 1, Rounding::Ceil), Ok(3));
        assert!(pool_out(4, 1, 2, 0, Rounding::Ceil).is_err());
        assert!(pool_out(4, 2, 1, 2, Rounding::Ceil).is_err());
    }

    #[test]
    fn reshape_copies_zeros_and_infers_minus_one() {
        assert_eq!(reshape(&[2, 8], &[0, 2, -1], 0, -1), Ok(vec![2, 2, 4]));
        assert_eq!(reshape(&[2, 8], &[2, 4], 1, -1), Ok(vec![2, 2, 4]));
        assert_eq!(reshape(&[2, 8], &[1], 0, 0), Ok(vec![1, 2, 8]));
        assert_eq!(reshape(&[2, 8], &[1], 1, 0), Ok(vec![2, 1, 8]));
        assert!(reshape(&[2, 8], &[-1, -1], 0, -1).is_err());
        assert!(reshape(&[2, 8], &[3, -1], 0, -1).is_err());
    }

    #[test]
    fn flatten_joins_the_axes_between() {
        assert_eq!(flatten(&[2, 3, 4, 5], 1, -1), Ok(vec![2, 60]));
        assert_eq!(flatten(&[2, 3, 4, 5], 1, 2), Ok(vec![2, 12, 5]));
    }
}
