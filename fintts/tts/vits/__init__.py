"""VITS training around transformers' VitsModel (which only implements inference)."""
