"""Measure what one CPU core spends per image in the input pipelines ddlsim models
(docs/design.md, "Input pipeline"), and write traces/input/pipeline.json.

ImageNet-sized JPEGs are generated here (469 x 387, the mean size ddlsim assumes for an ImageNet
training image, ddlsim.compute.passes.DECODED_IMAGE_PIXELS; quality 90; a smooth random field
plus grain: ~99 kB, near the ~110 kB of an ImageNet training JPEG), then each pipeline runs on
one core (TensorFlow with one intra-op and one inter-op thread), at a 224 x 224 crop (ResNet's,
EfficientNet-B0's) and at 380 x 380 (EfficientNet-B4's), ``KIND@SIZE`` in the output:

- ``decode``: the JPEG decoded whole (PIL, libjpeg-turbo), nothing else;
- ``crop-flip``: PyTorch's / torchvision's training transform (ImageFolder's PIL decode,
  RandomResizedCrop to 224 at scale 0.08-1 and aspect 3/4-4/3, bilinear, RandomHorizontalFlip,
  the uint8 array a collate function stacks; normalisation runs on the GPU in NVIDIA's loaders);
- ``crop-flip-tf``: the same with TensorFlow's ops as tf.data pipelines write it
  (sample_distorted_bounding_box, decode_and_crop_jpeg: only the crop is decoded, resize_images
  bilinear, random_flip_left_right);
- ``inception``: ``crop-flip-tf`` followed by the colour distortions of Inception's training
  preprocessing, which tf_cnn_benchmarks runs with ``--distortions`` (its default in 2017;
  preprocessing.py, ``train_image`` and ``distort_color``): the image to float, random
  brightness, saturation, hue and contrast, clipped;
- ``autoaugment``: ``crop-flip`` followed by one sub-policy of AutoAugment's ImageNet policy
  (Cubuk et al., CVPR 2019, appendix table: two PIL operations, each applied with its
  probability), as NVIDIA's EfficientNet recipes run it;

Every figure is the median over 5 passes of the mean CPU seconds (the process's CPU time, which
other work on a shared machine does not inflate as it does wall time) per image over all images.
Usage: python3 scripts/measure_input_pipeline.py [--images N]
"""

from __future__ import annotations

import argparse
import datetime
import io
import json
import os
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from PIL import Image, ImageEnhance, ImageOps

WIDTH, HEIGHT = 469, 387
CROP = 224
SIZES = (224, 380)
PASSES = 5
OUT = Path("traces/input/pipeline.json")


def make_jpegs(n: int, seed: int = 0) -> list[bytes]:
    """``n`` photograph-like JPEGs: smooth colour fields (upsampled noise) plus fine grain."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        coarse = rng.integers(0, 256, (12, 15, 3), dtype=np.uint8)
        field = Image.fromarray(coarse).resize((WIDTH, HEIGHT), Image.BICUBIC)
        grain = rng.normal(0, 20, (HEIGHT, WIDTH, 3))
        pixels = np.clip(np.asarray(field, dtype=np.float64) + grain, 0, 255).astype(np.uint8)
        buf = io.BytesIO()
        Image.fromarray(pixels).save(buf, format="JPEG", quality=90)
        out.append(buf.getvalue())
    return out


def random_resized_box(w: int, h: int, rng: random.Random) -> tuple[int, int, int, int]:
    """torchvision's RandomResizedCrop box: area 8-100% of the image, aspect 3/4-4/3."""
    for _ in range(10):
        area = w * h * rng.uniform(0.08, 1.0)
        aspect = np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3)))
        cw, ch = round((area * aspect) ** 0.5), round((area / aspect) ** 0.5)
        if 0 < cw <= w and 0 < ch <= h:
            x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
            return x, y, x + cw, y + ch
    return 0, 0, w, h


def crop_flip(jpeg: bytes, rng: random.Random, size: int = CROP) -> Image.Image:
    """torchvision's training transform with PIL: decode, random-resized crop, flip."""
    image = Image.open(io.BytesIO(jpeg)).convert("RGB")
    image = image.resize((size, size), Image.BILINEAR, box=random_resized_box(*image.size, rng))
    return image.transpose(Image.FLIP_LEFT_RIGHT) if rng.random() < 0.5 else image


def _shear(img: Image.Image, m: float) -> Image.Image:
    return img.transform(img.size, Image.AFFINE, (1, m * 0.3, 0, 0, 1, 0), Image.BILINEAR)


#: AutoAugment's ImageNet policy (Cubuk et al. 2019): 25 sub-policies of two (operation,
#: probability, magnitude 0-10); the operations written with PIL as the paper defines them
_OPS = {
    "posterize": lambda im, m: ImageOps.posterize(im, 8 - round(m * 4 / 10)),
    "rotate": lambda im, m: im.rotate(m * 3, resample=Image.BILINEAR),
    "solarize": lambda im, m: ImageOps.solarize(im, 256 - round(m * 25.6)),
    "autocontrast": lambda im, m: ImageOps.autocontrast(im),
    "equalize": lambda im, m: ImageOps.equalize(im),
    "color": lambda im, m: ImageEnhance.Color(im).enhance(0.1 + m * 0.18),
    "contrast": lambda im, m: ImageEnhance.Contrast(im).enhance(0.1 + m * 0.18),
    "sharpness": lambda im, m: ImageEnhance.Sharpness(im).enhance(0.1 + m * 0.18),
    "invert": lambda im, m: ImageOps.invert(im),
    "shear_x": _shear,
}
POLICY = [
    (("posterize", 0.4, 8), ("rotate", 0.6, 9)), (("solarize", 0.6, 5), ("autocontrast", 0.6, 5)),
    (("equalize", 0.8, 8), ("equalize", 0.6, 3)), (("posterize", 0.6, 7), ("posterize", 0.6, 6)),
    (("equalize", 0.4, 7), ("solarize", 0.2, 4)), (("equalize", 0.4, 4), ("rotate", 0.8, 8)),
    (("solarize", 0.6, 3), ("equalize", 0.6, 7)), (("posterize", 0.8, 5), ("equalize", 1.0, 2)),
    (("rotate", 0.2, 3), ("solarize", 0.6, 8)), (("equalize", 0.6, 8), ("posterize", 0.4, 6)),
    (("rotate", 0.8, 8), ("color", 0.4, 0)), (("rotate", 0.4, 9), ("equalize", 0.6, 2)),
    (("equalize", 0.0, 7), ("equalize", 0.8, 8)), (("invert", 0.6, 4), ("equalize", 1.0, 8)),
    (("color", 0.6, 4), ("contrast", 1.0, 8)), (("rotate", 0.8, 8), ("color", 1.0, 2)),
    (("color", 0.8, 8), ("solarize", 0.8, 7)), (("sharpness", 0.4, 7), ("invert", 0.6, 8)),
    (("shear_x", 0.6, 5), ("equalize", 1.0, 9)), (("color", 0.4, 0), ("equalize", 0.6, 3)),
    (("equalize", 0.4, 7), ("solarize", 0.2, 4)), (("solarize", 0.6, 5), ("autocontrast", 0.6, 5)),
    (("invert", 0.6, 4), ("equalize", 1.0, 8)), (("color", 0.6, 4), ("contrast", 1.0, 8)),
    (("equalize", 0.8, 8), ("equalize", 0.6, 3)),
]  # fmt: skip


def autoaugment(jpeg: bytes, rng: random.Random, size: int = CROP) -> Image.Image:
    """``crop_flip`` then one AutoAugment ImageNet sub-policy, each operation by its odds."""
    image = crop_flip(jpeg, rng, size)
    for name, p, magnitude in rng.choice(POLICY):
        if rng.random() < p:
            image = _OPS[name](image, magnitude)
    return image


def tf_pipelines() -> dict[str, Callable[[bytes, random.Random], np.ndarray]]:
    """TensorFlow's crop-flip and Inception pipelines, one image per call, on one core."""
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    box = tf.constant([[[0.0, 0.0, 1.0, 1.0]]])

    def crop(jpeg, size):
        begin, extent, _ = tf.image.sample_distorted_bounding_box(
            tf.image.extract_jpeg_shape(jpeg), bounding_boxes=box, min_object_covered=0.1,
            aspect_ratio_range=[0.75, 1.33], area_range=[0.05, 1.0], max_attempts=100,
            use_image_if_no_bounding_boxes=True,
        )  # fmt: skip
        window = tf.stack([begin[0], begin[1], extent[0], extent[1]])
        image = tf.image.decode_and_crop_jpeg(jpeg, window, channels=3)
        image = tf.image.resize(image, [size, size], method="bilinear")
        return tf.image.random_flip_left_right(image)

    def inception(jpeg, size):
        image = crop(jpeg, size) / 255.0
        image = tf.image.random_brightness(image, max_delta=32.0 / 255.0)
        image = tf.image.random_saturation(image, lower=0.5, upper=1.5)
        image = tf.image.random_hue(image, max_delta=0.2)
        image = tf.image.random_contrast(image, lower=0.5, upper=1.5)
        return tf.clip_by_value(image, 0.0, 1.0) * 255.0

    def one_image(fn, size):
        traced = tf.function(lambda jpeg: fn(jpeg, size))
        return lambda jpeg, rng: traced(tf.constant(jpeg)).numpy()

    pairs = (("crop-flip-tf", crop), ("inception", inception))
    return {f"{name}@{size}": one_image(fn, size) for name, fn in pairs for size in SIZES}


def seconds_per_image(fn, jpegs: list[bytes]) -> dict:
    """Median over passes of the mean seconds per image (one warm-up pass first)."""
    rng = random.Random(1)
    for j in jpegs[:4]:
        fn(j, rng)
    per_pass = []
    for _ in range(PASSES):
        t0 = time.process_time()
        for j in jpegs:
            fn(j, rng)
        per_pass.append((time.process_time() - t0) / len(jpegs))
    median = statistics.median(per_pass)
    return {"seconds_per_image": median, "images_per_s_per_core": 1 / median, "passes": per_pass}


def cpu_name() -> str:
    """The CPU's model name (/proc/cpuinfo)."""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def main() -> None:
    """Measure every pipeline and write :data:`OUT`."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=64)
    args = ap.parse_args()
    jpegs = make_jpegs(args.images)
    pipelines = {"decode": lambda j, r: np.asarray(Image.open(io.BytesIO(j)).convert("RGB"))}
    for size in SIZES:
        pipelines[f"crop-flip@{size}"] = lambda j, r, s=size: np.asarray(crop_flip(j, r, s))
        pipelines[f"autoaugment@{size}"] = lambda j, r, s=size: np.asarray(autoaugment(j, r, s))
    pipelines.update(tf_pipelines())
    doc = {
        "what": "seconds one core spends per ImageNet-sized JPEG in each input pipeline "
        "(scripts/measure_input_pipeline.py's docstring describes them); median of "
        f"{PASSES} passes over {args.images} images",
        "command": "python3 scripts/measure_input_pipeline.py",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cpu": cpu_name(),
        "cores": os.cpu_count(),
        "load_average": os.getloadavg(),
        "image": {"width": WIDTH, "height": HEIGHT, "quality": 90,
                  "mean_bytes": round(sum(map(len, jpegs)) / len(jpegs))},
        "pipelines": {k: seconds_per_image(f, jpegs) for k, f in pipelines.items()},
    }  # fmt: skip
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    for k, v in doc["pipelines"].items():
        ms, rate = v["seconds_per_image"] * 1e3, v["images_per_s_per_core"]
        print(f"{k:16s} {ms:7.2f} ms  {rate:7.0f}/s")


if __name__ == "__main__":
    main()
