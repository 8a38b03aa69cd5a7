"""The data layer: corpora, tokenizers, on-disk token arrays and block samplers.

Typical use::

    from complexformer.data import (
        BlockSampler, EvalBlocks, get_tokenizer, inputs_targets, load_corpus, tokenize_split,
    )

    corpus = load_corpus("stdlib", log=print)          # or "text:data/**/*.jsonl", "hf:..."
    tok = get_tokenizer(None, corpus, vocab_size=8192)  # cached byte-level BPE
    train = tokenize_split(corpus, "train", tok)        # np.memmap (N,)
    sampler = BlockSampler(train, block_size=256, batch_size=32, seed=0, rank=0, world_size=1)
    x, y = inputs_targets(sampler.batch(step))          # (B, T), (B, T)

Modules: :mod:`.spec` (spec strings, :func:`load_corpus`), :mod:`.corpus` (interface),
:mod:`.files` (``stdlib`` and ``text:``), :mod:`.hf` (``hf:``), :mod:`.splits` (hash split),
:mod:`.tokenizer` (wrapper), :mod:`.bpe` (BPE training and cache), :mod:`.tokens` (token
arrays), :mod:`.blocks` (samplers), :mod:`.cache` (cache directory and atomic writes),
:mod:`.prepare` (``complexformer prepare``: a corpus tokenized once into shards),
:mod:`.prepared` (``prepared:DIR``), :mod:`.shards` (shard files as one array),
:mod:`.barrier` (the file barrier of a distributed start).
"""

from .blocks import BlockSampler, EvalBlocks, gather_blocks, inputs_targets
from .bpe import (
    DEFAULT_VOCAB_SIZE,
    BPEResult,
    bpe_cache_dir,
    get_tokenizer,
    train_bpe,
    train_or_load_bpe,
)
from .cache import CACHE_ENV_VAR, cache_root
from .corpus import Corpus, SplitStats
from .files import FileCorpus, expand_text_glob, list_stdlib_files, stdlib_corpus, text_corpus
from .hf import HFCorpus
from .prepare import prepare_corpus
from .prepared import PreparedCorpus
from .spec import DEFAULT_SPEC, DataSpec, load_corpus, parse_data_spec
from .splits import DEFAULT_FRACTIONS, SPLITS, split_of
from .tokenizer import EOT_TOKEN, Tokenizer, load_tokenizer
from .tokens import (
    load_token_splits,
    open_tokens,
    pack_documents,
    token_cache_path,
    token_dtype,
    tokenize_split,
)

__all__ = [
    "CACHE_ENV_VAR",
    "DEFAULT_FRACTIONS",
    "DEFAULT_SPEC",
    "DEFAULT_VOCAB_SIZE",
    "EOT_TOKEN",
    "SPLITS",
    "BPEResult",
    "BlockSampler",
    "Corpus",
    "DataSpec",
    "EvalBlocks",
    "FileCorpus",
    "HFCorpus",
    "PreparedCorpus",
    "SplitStats",
    "Tokenizer",
    "bpe_cache_dir",
    "cache_root",
    "expand_text_glob",
    "gather_blocks",
    "get_tokenizer",
    "inputs_targets",
    "list_stdlib_files",
    "load_corpus",
    "load_token_splits",
    "load_tokenizer",
    "open_tokens",
    "pack_documents",
    "parse_data_spec",
    "prepare_corpus",
    "split_of",
    "stdlib_corpus",
    "text_corpus",
    "token_cache_path",
    "token_dtype",
    "tokenize_split",
    "train_bpe",
    "train_or_load_bpe",
]
