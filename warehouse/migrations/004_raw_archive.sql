-- The raw archive with a budget (warehouse/archive.py): how each body is stored, and whether gc
-- has removed it. Rows written before this migration keep nulls: their bodies are stored as they
-- came (`<sha[:2]>/<sha>`), whole, and are read exactly as before.

-- null: stored as it came; 'zstd': the stored file is a zstd frame.
alter table raw.responses add column if not exists compression varchar;
-- null: the whole body is stored; else the prefilter that kept only the rows parsing reads
-- ('aws-offer-csv': an AWS offer file's preamble, header and plain Linux on-demand rows).
alter table raw.responses add column if not exists prefilter varchar;
-- Bytes of the stored file (shared by every exchange with the same body); null before 004.
alter table raw.responses add column if not exists stored_bytes bigint;
-- When `gpucost gc` removed the body under the retention policy; null while it is kept.
alter table raw.responses add column if not exists pruned_at timestamptz;
