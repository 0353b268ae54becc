"""Scanned-style PDFs: each page an image of a slightly skewed, speckled printout.

`text_layer=True` adds what OCR software adds: the page's text drawn invisibly (PDF text
render mode 3) where it appears on the image, so a text extractor reads it and a viewer shows
only the image. Without it the page holds no text at all, and only reading the image recovers
it. Which one a file is, is stated in its metadata (`Subject`) and in the world's manifest.
"""

from __future__ import annotations

import io
import random
from collections.abc import Sequence
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont
from reportlab.lib.pagesizes import LETTER
from reportlab.lib.utils import ImageReader
from reportlab.pdfgen.canvas import Canvas

DPI = 100
LINES_PER_PAGE = 34
FONT_PT = 11.0


def _page_image(lines: Sequence[str], rng: random.Random) -> Image.Image:
    width, height = int(LETTER[0] / 72 * DPI), int(LETTER[1] / 72 * DPI)
    image = Image.new("L", (width, height), 246)
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=FONT_PT / 72 * DPI)
    for k, line in enumerate(lines):
        draw.text((DPI * 0.9, DPI * (0.9 + k * 0.26)), line, font=font, fill=rng.randint(20, 50))
    for _ in range(400):  # speckle from the scanner glass
        x, y = rng.randrange(width), rng.randrange(height)
        draw.point((x, y), fill=rng.randint(90, 180))
    return image.rotate(rng.uniform(-0.8, 0.8), resample=Image.Resampling.BILINEAR, fillcolor=246)


def write_scan(path: Path, title: str, lines: Sequence[str], *, text_layer: bool, seed: int) -> int:
    """Write the scan; returns its page count."""
    rng = random.Random(seed)
    canvas = Canvas(str(path), pagesize=LETTER, invariant=True, pageCompression=1)
    canvas.setTitle(title)
    canvas.setAuthor("bureau world generator")
    canvas.setSubject("scanned document; " + ("OCR text layer" if text_layer else "no text layer"))
    pages = [lines[i : i + LINES_PER_PAGE] for i in range(0, len(lines), LINES_PER_PAGE)] or [[]]
    for page in pages:
        jpeg = io.BytesIO()  # embedded as JPEG, as scanners store pages
        _page_image(page, rng).save(jpeg, "JPEG", quality=55, optimize=True)
        jpeg.seek(0)
        canvas.drawImage(ImageReader(jpeg), 0, 0, width=LETTER[0], height=LETTER[1])
        if text_layer:
            text = canvas.beginText()
            text.setTextRenderMode(3)  # invisible, as OCR layers are
            text.setFont("Helvetica", FONT_PT)
            for k, line in enumerate(page):
                text.setTextOrigin(0.9 * 72, LETTER[1] - (0.9 + k * 0.26) * 72 - FONT_PT)
                text.textLine(line)
            canvas.drawText(text)
        canvas.showPage()
    canvas.save()
    return len(pages)
