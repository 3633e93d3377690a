//! Images as calibration inputs: decode (JPEG, PNG, BMP with the `image` crate), convert to RGB
//! or gray as Pillow's `convert` does, resize (shorter side or exact) or letterbox, center-crop,
//! then order channels, lay out NCHW or NHWC and normalise: `(pixel × scale − mean) / std` in
//! float32, or the raw 8-bit values for a `uint8` input. Each step is the torchvision/PIL (and
//! Ultralytics for the letterbox) convention, so a calibration tensor equals what the model's
//! own Python preprocessing gives (`testdata/images`, golden test in `tests/images.rs`).

use super::resample::{Interpolation, Pixels};
use crate::error::{ApiError, Result};
use mppq_ir::{DataType, TensorData};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// File extensions read as images.
pub const IMAGE_EXTENSIONS: &[&str] = &["jpg", "jpeg", "png", "bmp"];

/// How images become an input tensor. Settings file: `[data.image]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ImageSpec {
    /// `"S"`: the shorter side becomes S, the other keeps the aspect ratio (torchvision's
    /// `Resize(S)`); `"WxH"`: exactly that size.
    pub resize: Option<String>,
    /// Resize to fit inside `"WxH"` keeping the aspect ratio and pad the rest with `pad_value`,
    /// centred (Ultralytics' letterbox). Excludes `resize`.
    pub letterbox: Option<String>,
    /// `"S"` or `"WxH"`: the centre of the (resized) image (torchvision's `CenterCrop`).
    pub crop: Option<String>,
    /// Resampling filter of `resize` and `letterbox` (Pillow's).
    pub interpolation: Interpolation,
    /// Value of the letterbox's padding.
    pub pad_value: u8,
    /// Channel order: `rgb`, `bgr` (OpenCV-trained models) or `gray` (Pillow's luma).
    pub channels: Channels,
    /// `nchw` or `nhwc`.
    pub layout: Layout,
    /// Multiplies each 8-bit value before `mean` and `std` (default 1/255).
    pub scale: f32,
    /// Subtracted per channel after scaling (one value for all channels, or one per channel).
    pub mean: Vec<f32>,
    /// Divides per channel after the mean.
    pub std: Vec<f32>,
}

impl Default for ImageSpec {
    fn default() -> Self {
        Self {
            resize: None,
            letterbox: None,
            crop: None,
            interpolation: Interpolation::Bilinear,
            pad_value: 114,
            channels: Channels::Rgb,
            layout: Layout::Nchw,
            scale: 1.0 / 255.0,
            mean: vec![0.0],
            std: vec![1.0],
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Channels {
    #[default]
    Rgb,
    Bgr,
    Gray,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    #[default]
    Nchw,
    Nhwc,
}

/// A size of the spec: one number (a side) or `WxH`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Size {
    Side(usize),
    Exact(usize, usize),
}

fn parse_size(what: &str, text: &str) -> Result<Size> {
    let bad = || {
        ApiError::Setting(format!("image {what} `{text}`: expected a positive size `S` or `WxH` (e.g. 256 or 640x480)"))
    };
    let positive = |s: &str| s.trim().parse::<usize>().ok().filter(|v| *v > 0 && *v <= 1 << 16);
    match text.split_once(['x', 'X']) {
        Some((w, h)) => Ok(Size::Exact(positive(w).ok_or_else(bad)?, positive(h).ok_or_else(bad)?)),
        None => Ok(Size::Side(positive(text).ok_or_else(bad)?)),
    }
}

/// The spec checked once, with sizes parsed.
#[derive(Clone, Debug)]
pub struct ImagePipeline {
    spec: ImageSpec,
    resize: Option<Size>,
    letterbox: Option<(usize, usize)>,
    crop: Option<(usize, usize)>,
    dtype: DataType,
}

impl ImagePipeline {
    /// Checks `spec` for an input of element type `dtype`.
    pub fn new(spec: &ImageSpec, dtype: DataType) -> Result<Self> {
        let resize = spec.resize.as_deref().map(|t| parse_size("resize", t)).transpose()?;
        let letterbox = match spec.letterbox.as_deref().map(|t| parse_size("letterbox", t)).transpose()? {
            Some(Size::Exact(w, h)) => Some((w, h)),
            Some(Size::Side(s)) => Some((s, s)),
            None => None,
        };
        let crop = match spec.crop.as_deref().map(|t| parse_size("crop", t)).transpose()? {
            Some(Size::Exact(w, h)) => Some((w, h)),
            Some(Size::Side(s)) => Some((s, s)),
            None => None,
        };
        if resize.is_some() && letterbox.is_some() {
            return Err(ApiError::Setting("image resize and letterbox exclude each other: give one".into()));
        }
        let channels = spec.channels.count();
        for (what, values) in [("mean", &spec.mean), ("std", &spec.std)] {
            if values.len() != 1 && values.len() != channels {
                return Err(ApiError::Setting(format!(
                    "image {what}: {} values for {channels} channel(s); give one value or one per channel",
                    values.len()
                )));
            }
            if values.iter().any(|v| !v.is_finite()) {
                return Err(ApiError::Setting(format!("image {what} must be finite numbers")));
            }
        }
        if spec.std.contains(&0.0) || !spec.scale.is_finite() || spec.scale == 0.0 {
            return Err(ApiError::Setting("image std and scale must be finite and non-zero".into()));
        }
        let default = ImageSpec::default();
        match dtype {
            DataType::Float => {}
            DataType::Uint8 => {
                if spec.scale != default.scale || spec.mean != default.mean || spec.std != default.std {
                    return Err(ApiError::Setting(
                        "the image input is uint8: it takes the 8-bit values, so scale, mean and std do not apply"
                            .into(),
                    ));
                }
            }
            other => {
                return Err(ApiError::Setting(format!(
                    "images can feed a float32 or uint8 input, not {other}: convert the data to .npy instead"
                )));
            }
        }
        Ok(Self { spec: spec.clone(), resize, letterbox, crop, dtype })
    }

    pub fn channels(&self) -> usize {
        self.spec.channels.count()
    }

    pub fn layout(&self) -> Layout {
        self.spec.layout
    }

    /// The (width, height) an image of `width`×`height` becomes; errors name what does not fit.
    pub fn output_size(&self, width: usize, height: usize) -> std::result::Result<(usize, usize), String> {
        let (mut w, mut h) = (width, height);
        if let Some((bw, bh)) = self.letterbox {
            (w, h) = (bw, bh);
        }
        match self.resize {
            Some(Size::Exact(rw, rh)) => (w, h) = (rw, rh),
            Some(Size::Side(s)) => (w, h) = shorter_side(w, h, s),
            None => {}
        }
        if let Some((cw, ch)) = self.crop {
            if cw > w || ch > h {
                return Err(format!("center crop {cw}x{ch} is larger than the image ({w}x{h} after resizing)"));
            }
            (w, h) = (cw, ch);
        }
        Ok((w, h))
    }

    /// Decodes `path` and runs the pipeline: one image as `[C, H, W]` (NCHW) or `[H, W, C]`.
    pub fn load(&self, path: &Path) -> Result<TensorData> {
        let pixels = decode(path, self.spec.channels)?;
        let pixels = self.geometry(pixels).map_err(|m| ApiError::data(path, m))?;
        self.to_tensor(&pixels).map_err(|e| ApiError::data(path, e.to_string()))
    }

    fn geometry(&self, mut img: Pixels) -> std::result::Result<Pixels, String> {
        let filter = self.spec.interpolation;
        if let Some((bw, bh)) = self.letterbox {
            // Ultralytics: the ratio that fits, sizes rounded half to even, padding split with
            // the odd pixel on the right and bottom.
            let r = (bw as f64 / img.width as f64).min(bh as f64 / img.height as f64);
            let nw = ((img.width as f64 * r).round_ties_even() as usize).clamp(1, bw);
            let nh = ((img.height as f64 * r).round_ties_even() as usize).clamp(1, bh);
            img = img.resize(nw, nh, filter).pad((bw - nw) / 2, (bh - nh) / 2, bw, bh, self.spec.pad_value);
        }
        match self.resize {
            Some(Size::Exact(w, h)) => img = img.resize(w, h, filter),
            Some(Size::Side(s)) => {
                let (w, h) = shorter_side(img.width, img.height, s);
                img = img.resize(w, h, filter);
            }
            None => {}
        }
        if let Some((cw, ch)) = self.crop {
            if cw > img.width || ch > img.height {
                return Err(format!(
                    "center crop {cw}x{ch} is larger than the image ({}x{} after resizing)",
                    img.width, img.height
                ));
            }
            // torchvision: offsets rounded half to even.
            let left = ((img.width - cw) as f64 / 2.0).round_ties_even() as usize;
            let top = ((img.height - ch) as f64 / 2.0).round_ties_even() as usize;
            img = img.crop(left, top, cw, ch);
        }
        Ok(img)
    }

    fn to_tensor(&self, img: &Pixels) -> mppq_ir::Result<TensorData> {
        let c = img.channels;
        let (h, w) = (img.height, img.width);
        // Source channel of output channel k: BGR reverses RGB.
        let source = |k: usize| if self.spec.channels == Channels::Bgr { c - 1 - k } else { k };
        let shape = match self.spec.layout {
            Layout::Nchw => vec![c, h, w],
            Layout::Nhwc => vec![h, w, c],
        };
        let index = |k: usize, y: usize, x: usize| match self.spec.layout {
            Layout::Nchw => (k * h + y) * w + x,
            Layout::Nhwc => (y * w + x) * c + k,
        };
        let pick = |values: &[f32], k: usize| if values.len() == 1 { values[0] } else { values[k] };
        if self.dtype == DataType::Uint8 {
            let mut out = vec![0u8; c * h * w];
            for y in 0..h {
                for x in 0..w {
                    for k in 0..c {
                        out[index(k, y, x)] = img.data[(y * w + x) * c + source(k)];
                    }
                }
            }
            return TensorData::from_packed(DataType::Uint8, shape, out);
        }
        let mut out = vec![0f32; c * h * w];
        for k in 0..c {
            let (mean, std) = (pick(&self.spec.mean, k), pick(&self.spec.std, k));
            for y in 0..h {
                for x in 0..w {
                    let v = f32::from(img.data[(y * w + x) * c + source(k)]);
                    out[index(k, y, x)] = (v * self.spec.scale - mean) / std;
                }
            }
        }
        TensorData::from_vec(shape, &out)
    }
}

impl Channels {
    pub fn count(self) -> usize {
        if self == Self::Gray { 1 } else { 3 }
    }
}

/// torchvision's `Resize(S)`: the shorter side becomes S, the longer one `int(S × long / short)`.
fn shorter_side(width: usize, height: usize, side: usize) -> (usize, usize) {
    if width <= height {
        (side, (side as u64 * height as u64 / width.max(1) as u64) as usize)
    } else {
        ((side as u64 * width as u64 / height.max(1) as u64) as usize, side)
    }
}

/// The width and height in an image file's header (cheap: nothing is decoded).
pub fn dimensions(path: &Path) -> Result<(usize, usize)> {
    let reader = image::ImageReader::open(path)
        .map_err(|source| ApiError::Io { path: path.display().to_string(), source })?
        .with_guessed_format()
        .map_err(|source| ApiError::Io { path: path.display().to_string(), source })?;
    let (w, h) = reader.into_dimensions().map_err(|e| ApiError::data(path, format!("not a readable image: {e}")))?;
    Ok((w as usize, h as usize))
}

/// Decodes an 8-bit image to RGB, or to gray with Pillow's `convert("L")` (ITU-R 601-2 luma in
/// 16-bit fixed point). Alpha is dropped, as Pillow's `convert("RGB")` does.
fn decode(path: &Path, channels: Channels) -> Result<Pixels> {
    let io = |source| ApiError::Io { path: path.display().to_string(), source };
    let bytes = std::fs::read(path).map_err(io)?;
    let reader = image::ImageReader::new(std::io::Cursor::new(&bytes)).with_guessed_format().map_err(io)?;
    if reader.format() == Some(image::ImageFormat::Jpeg) && !jpeg_is_complete(&bytes) {
        // The decoder fills a cut scan with gray without a word; Pillow refuses such a file too.
        return Err(ApiError::data(path, "a truncated JPEG (no end-of-image marker after its scan): copy it again"));
    }
    let img = reader.decode().map_err(|e| ApiError::data(path, format!("not a readable image: {e}")))?;
    if matches!(img.color().bytes_per_pixel() / img.color().channel_count().max(1), 2 | 4) {
        return Err(ApiError::data(path, "16- and 32-bit images are not read: save 8-bit JPEG or PNG"));
    }
    let rgb = img.to_rgb8();
    let (width, height) = (rgb.width() as usize, rgb.height() as usize);
    let data = rgb.into_raw();
    if channels != Channels::Gray {
        return Ok(Pixels { width, height, channels: 3, data });
    }
    let luma = data
        .chunks_exact(3)
        .map(|p| ((u32::from(p[0]) * 19595 + u32::from(p[1]) * 38470 + u32::from(p[2]) * 7471 + 0x8000) >> 16) as u8)
        .collect();
    Ok(Pixels { width, height, channels: 1, data: luma })
}

/// Whether a JPEG has its end-of-image marker (`FF D9`) after the start of its last scan
/// (`FF DA`): a file cut short has none. Bytes after the marker (camera trailers) are allowed.
fn jpeg_is_complete(bytes: &[u8]) -> bool {
    let last_scan = bytes.windows(2).rposition(|w| w == [0xFF, 0xDA]).unwrap_or(0);
    bytes[last_scan..].windows(2).any(|w| w == [0xFF, 0xD9])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_truncated_jpeg_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut jpeg = Vec::new();
        let img = image::RgbImage::from_fn(32, 32, |x, y| image::Rgb([(x * 8) as u8, (y * 8) as u8, 0]));
        image::DynamicImage::ImageRgb8(img)
            .write_to(&mut std::io::Cursor::new(&mut jpeg), image::ImageFormat::Jpeg)
            .unwrap();
        assert!(jpeg_is_complete(&jpeg));
        let whole = dir.path().join("whole.jpg");
        std::fs::write(&whole, &jpeg).unwrap();
        assert!(decode(&whole, Channels::Rgb).is_ok());
        let cut = dir.path().join("cut.jpg");
        std::fs::write(&cut, &jpeg[..jpeg.len() * 2 / 3]).unwrap();
        let msg = decode(&cut, Channels::Rgb).err().unwrap().to_string();
        assert!(msg.contains("truncated JPEG") && msg.contains("cut.jpg"), "{msg}");
    }

    #[test]
    fn sizes_parse_and_bad_ones_are_named() {
        assert_eq!(parse_size("resize", "256").unwrap(), Size::Side(256));
        assert_eq!(parse_size("resize", "640x480").unwrap(), Size::Exact(640, 480));
        for bad in ["0", "-3", "12x", "axb", "99999999"] {
            let err = parse_size("crop", bad).unwrap_err().to_string();
            assert!(err.contains(bad) && err.contains("crop"), "{err}");
        }
    }

    #[test]
    fn specs_that_cannot_work_are_refused() {
        let spec = ImageSpec { resize: Some("256".into()), letterbox: Some("640".into()), ..Default::default() };
        assert!(ImagePipeline::new(&spec, DataType::Float).unwrap_err().to_string().contains("exclude"));
        let spec = ImageSpec { mean: vec![0.1, 0.2], ..Default::default() };
        assert!(ImagePipeline::new(&spec, DataType::Float).unwrap_err().to_string().contains("2 values"));
        let spec = ImageSpec { std: vec![0.0], ..Default::default() };
        assert!(ImagePipeline::new(&spec, DataType::Float).is_err());
        let spec = ImageSpec { mean: vec![0.5], ..Default::default() };
        assert!(ImagePipeline::new(&spec, DataType::Uint8).unwrap_err().to_string().contains("uint8"));
        assert!(ImagePipeline::new(&ImageSpec::default(), DataType::Int64).is_err());
    }

    #[test]
    fn output_sizes_follow_torchvision() {
        let p = ImagePipeline::new(
            &ImageSpec { resize: Some("256".into()), crop: Some("224".into()), ..Default::default() },
            DataType::Float,
        )
        .unwrap();
        assert_eq!(p.output_size(500, 375).unwrap(), (224, 224));
        assert_eq!(shorter_side(500, 375, 256), (341, 256));
        let p =
            ImagePipeline::new(&ImageSpec { crop: Some("300".into()), ..Default::default() }, DataType::Float).unwrap();
        assert!(p.output_size(200, 400).unwrap_err().contains("larger"));
    }
}
