"""`bureau report`: a run folder of any kind read back (`run.py`) and drawn as one
self-contained HTML page (`page.py`, with matplotlib's SVG charts from `charts.py`)."""
