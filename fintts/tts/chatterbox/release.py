"""The names of Chatterbox's release and of its stand-in, read by the trainer and by the laptop alike: nothing of ours
imported, so ``fintts say`` learns a folder is a dry run's without the trainer's modules."""

#: weights: T3 from random weights at ``model:``'s sizes, with random stand-ins for the frozen parts (tests, dry runs, the GPU check)
RANDOM = "random"
#: the Hub repo that holds the release (MIT): t3_mtl23ls_v2.safetensors, s3gen.pt, ve.pt, the grapheme vocabulary, conds.pt
RELEASE_REPO = "ResembleAI/chatterbox"
RELEASE_T3 = "t3_mtl23ls_v2.safetensors"
#: the release's newer T3, the same layout (upstream's ``from_pretrained(t3_model="v3")`` reads it; docs/chatterbox.md)
RELEASE_T3_V3 = "t3_mtl23ls_v3.safetensors"
#: ``t3_file``'s short names, as upstream's ``mtl_tts._resolve_multilingual_t3_model`` takes them
T3_VERSIONS = {"v2": RELEASE_T3, "v3": RELEASE_T3_V3}
