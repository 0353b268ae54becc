"""Writers that turn world content into real files, opened later by the real libraries.

Each writer is deterministic: the same content gives the same bytes, so a world depends only on
its seed. Office files (xlsx, docx, pptx) are zip containers whose entry timestamps and document
properties are pinned by `ziputil.normalize_ooxml`.
"""
