"""trec_eval-compatible offline scoring: read qrels and runs, compute measures, format output."""
