"""`rvvkit generate`: text (token ids, or text through a tokenizer) from a decoder artifact,
streamed as it comes, then the prompt and generation speeds."""
from __future__ import annotations

import argparse
import sys
from typing import List

from ..errors import InputError, RvvkitError
from ..llm.decoder import require
from ..llm.generate import Sampling, check_prompt, eos_ids
from ..llm.chat import load_template
from ..llm.text import TextStream
from ..artifact.container import TOKENIZER as TOKENIZER_SECTION
from .common import UsageError, add_threads_option, count, executor, open_session, progress, \
    vlen
from .sign import add_require_option, verified


def token_ids(text: str) -> List[int]:
    """argparse type of --prompt-ids 1,2,3."""
    try:
        ids = [int(t) for t in text.replace(" ", ",").split(",") if t]
    except ValueError:
        ids = []
    if not ids:
        raise argparse.ArgumentTypeError(f"expected token ids like 1,2,3, got {text!r}")
    return ids


def _tokenizers():
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise RvvkitError("text needs the tokenizers package: pip install 'rvvkit[llm]' (or "
                          "give --prompt-ids)") from None
    return Tokenizer


def _tokenizer(args, art):
    """--tokenizer's file, else the tokenizer the artifact carries (a GGUF model's), else
    None."""
    if args.tokenizer:
        where = f"cannot read tokenizer {args.tokenizer}"

        def load(tokenizer):
            return tokenizer.from_file(args.tokenizer)
    elif TOKENIZER_SECTION in art.extra:
        where = f"{args.artifact}: its tokenizer does not load"

        def load(tokenizer):
            return tokenizer.from_str(art.extra[TOKENIZER_SECTION].decode("utf-8"))
    else:
        return None
    tokenizer = _tokenizers()
    try:
        return load(tokenizer)
    except Exception as exc:  # the package raises its own exception types
        raise InputError(f"{where}: {exc}") from None


def _load(path: str):
    from ..artifact.container import Artifact
    return Artifact.load(path)


def cmd_generate(args) -> int:
    if args.chat:
        return _chat(args)
    if (args.prompt is None) == (args.prompt_ids is None):
        raise UsageError("give exactly one of --prompt-ids and --prompt")
    _check_eos_options(args)
    art = _artifact(args)
    tok = _tokenizer(args, art)
    if args.prompt is not None and tok is None:
        raise UsageError("--prompt TEXT needs --tokenizer tokenizer.json (this artifact "
                         "carries no tokenizer)")
    prompt = args.prompt_ids if args.prompt is None else tok.encode(args.prompt).ids
    _checked(args, art, prompt)
    with _open(args, art) as sess:
        result = _reply(args, sess, tok, prompt)
    progress(result.summary() + f" on {args.on}")
    return 0


def _check_eos_options(args) -> None:
    if args.eos is not None and args.ignore_eos:
        raise UsageError("give at most one of --eos and --ignore-eos")


def _artifact(args):
    return verified(args, args.artifact) or _load(args.artifact)


def _checked(args, art, prompt=None):
    """The artifact, the prompt (when there is one yet), the eos ids and the sampling checked
    before any compile: a bad one is one line, at once."""
    if prompt is not None:
        check_prompt(require(art.meta), prompt, args.max_new_tokens)
    eos_ids(require(art.meta), args.eos)
    _sampling(args).check()
    return art


def _sampling(args) -> Sampling:
    return Sampling(args.temperature, args.top_k, args.top_p, args.seed)


def _open(args, art):
    return open_session(art, args.on, compiler=args.compiler, no_cache=args.no_cache,
                        vlen=args.vlen, threads=args.threads)


def _reply(args, sess, tok, prompt):
    """One generation, streamed to stdout (text through `tok`, else ids); Ctrl-C keeps what
    was shown and says how much."""
    text = TextStream(tok, prompt) if tok else None
    shown: List[int] = []

    def show(token: int) -> None:
        shown.append(token)
        sys.stdout.write(text.push(token) if text else f"{token} ")
        sys.stdout.flush()
    try:
        result = sess.generate(prompt, args.max_new_tokens, sampling=_sampling(args),
                               eos=[] if args.ignore_eos else args.eos, on_token=show)
    except KeyboardInterrupt:
        # what was generated is on the screen already: finish its text, say where it stopped
        sys.stdout.write((text.finish() if text else "") + "\n")
        sys.stdout.flush()
        progress(f"interrupted after {len(shown)} generated tokens (shown above)")
        raise
    sys.stdout.write((text.finish() if text else "") + "\n")
    sys.stdout.flush()
    return result


def _chat(args) -> int:
    """Turns read from stdin (a line each; an empty line or end of input ends the chat), each
    answered by generating after the whole conversation rendered by the chat template."""
    if args.prompt is not None or args.prompt_ids is not None:
        raise UsageError("--chat reads the turns from stdin: give no --prompt/--prompt-ids")
    _check_eos_options(args)
    art = _artifact(args)
    tok = _tokenizer(args, art)
    if tok is None:
        raise UsageError("--chat needs --tokenizer tokenizer.json (this artifact carries no "
                         "tokenizer)")
    dec = art.meta.get("decoder") or {}
    template = load_template(args.tokenizer, args.chat_template,
                             dec.get("chat_template") and (dec["chat_template"],
                                                           dec.get("chat_specials") or {}))
    messages = [{"role": "system", "content": args.system}] if args.system else []
    # the template renders a conversation before any compile; each turn's prompt is checked
    # against the artifact as it comes
    template.render(messages + [{"role": "user", "content": "hi"}])
    _checked(args, art)
    with _open(args, art) as sess:
        while True:
            if sys.stdin.isatty():
                sys.stderr.write("> ")
                sys.stderr.flush()
            line = sys.stdin.readline()
            if not line.strip():
                return 0
            messages.append({"role": "user", "content": line.rstrip("\n")})
            prompt = tok.encode(template.render(messages), add_special_tokens=False).ids
            check_prompt(require(art.meta), prompt, args.max_new_tokens)
            result = _reply(args, sess, tok, prompt)
            reply = tok.decode(result.tokens[:-1] if result.stopped == "eos" else
                               result.tokens)
            messages.append({"role": "assistant", "content": reply})
            progress(result.summary())


def add_parser(sub) -> None:
    r = sub.add_parser("generate", help="generate tokens with a decoder artifact",
                       description="Generate text with a decoder artifact (a model with "
                       "key/value caches, e.g. onnxruntime-genai's GroupQueryAttention form): "
                       "the prompt, then up to --max-new-tokens tokens, printed as they come; "
                       "greedy unless --temperature is given.")
    r.add_argument("artifact")
    r.add_argument("--prompt-ids", type=token_ids, metavar="IDS",
                   help="the prompt as token ids, e.g. 1,2,3")
    r.add_argument("--prompt", metavar="TEXT", help="the prompt as text (needs --tokenizer)")
    r.add_argument("--tokenizer", metavar="JSON", help="a tokenizers tokenizer.json: encodes "
                   "--prompt and decodes the output")
    r.add_argument("--max-new-tokens", type=count(1), default=32,
                   help="tokens to generate at most (default 32; stops earlier, saying so, "
                        "when the artifact's cache is full)")
    r.add_argument("--eos", type=token_ids, metavar="IDS",
                   help="stop after any of these token ids, e.g. 2 or 151643,151645 (default: "
                        "the model's own, read from genai_config.json, generation_config.json "
                        "or config.json beside the model when it was built)")
    r.add_argument("--ignore-eos", action="store_true",
                   help="generate --max-new-tokens tokens whatever they are")
    r.add_argument("--chat", action="store_true",
                   help="chat: read turns from stdin (a line each; an empty line ends), render "
                        "the conversation with the model's chat template (tokenizer_config.json "
                        "beside --tokenizer, or --chat-template) and answer each")
    r.add_argument("--chat-template", metavar="FILE", help="a Jinja chat template for --chat")
    r.add_argument("--system", metavar="TEXT", help="--chat: a system message first")
    r.add_argument("--temperature", type=float, default=0.0,
                   help="sample at this temperature (default 0: greedy)")
    r.add_argument("--top-k", type=count(0), default=0, help="sample among the k likeliest")
    r.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass")
    r.add_argument("--seed", type=int, default=0, help="the sampler's seed")
    r.add_argument("--on", default="host", type=executor, metavar="EXECUTOR",
                   help="host, qemu, cuda, cuda-emu or ssh://[user@]host[:port] (default "
                        "host); on qemu and boards the loop runs on the target")
    r.add_argument("--compiler", help="compiler command (overrides RVVKIT_COMPILER)")
    r.add_argument("--vlen", type=vlen, help="RVV vector length for --on qemu")
    r.add_argument("--no-cache", action="store_true", help="compile afresh, bypass the cache")
    add_threads_option(r)
    add_require_option(r)
    r.set_defaults(func=cmd_generate, parser=r)
