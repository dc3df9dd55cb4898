// llama.cpp's own answer for a GGUF file, the reference rvvkit's GGUF import is checked against
// (a measuring tool for tests/llm/export_gguf.py; rvvkit never links llama.cpp).
//   gguf_reference MODEL.gguf generate IDS STEPS  -> JSON {"tokens": [...], "logits": [[...]]}
//     greedy: the prompt IDS (1,2,3) in one batch, then STEPS tokens one at a time; the logits
//     are those each chosen token was picked from
//   gguf_reference MODEL.gguf tokenize TEXT        -> JSON {"ids": [...]}  (no BOS added)
// One thread and float32 key/value caches, so that the figures are llama.cpp's arithmetic and
// not its cache's float16 rounding.
#include "llama.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

static std::vector<llama_token> parse_ids(const char *s) {
    std::vector<llama_token> ids;
    for (const char *p = s; *p;) {
        ids.push_back((llama_token) strtol(p, (char **) &p, 10));
        if (*p == ',') ++p;
    }
    return ids;
}

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; ++i) if (x[i] > x[best]) best = i;
    return best;
}

static void print_ids(const char *key, const std::vector<llama_token> &ids) {
    printf("\"%s\": [", key);
    for (size_t i = 0; i < ids.size(); ++i) printf("%s%d", i ? ", " : "", ids[i]);
    printf("]");
}

static int generate(llama_model *model, std::vector<llama_token> prompt, int steps) {
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 512;
    cp.n_batch = cp.n_ubatch = 512;
    cp.n_threads = cp.n_threads_batch = 1;
    cp.type_k = cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "cannot make a context\n"); return 1; }
    const int vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    std::vector<llama_token> out;
    std::vector<std::vector<float>> logits;
    llama_batch batch = llama_batch_get_one(prompt.data(), (int32_t) prompt.size());
    llama_token tok = 0;
    for (int step = 0; step < steps; ++step) {
        if (llama_decode(ctx, batch)) { fprintf(stderr, "decode failed at %d\n", step); return 1; }
        const float *l = llama_get_logits_ith(ctx, -1);
        logits.emplace_back(l, l + vocab);
        tok = argmax(l, vocab);
        out.push_back(tok);
        batch = llama_batch_get_one(&tok, 1);
    }
    printf("{");
    print_ids("tokens", out);
    printf(", \"logits\": [");
    for (size_t s = 0; s < logits.size(); ++s) {
        printf("%s[", s ? ", " : "");
        for (int i = 0; i < vocab; ++i) printf("%s%.9g", i ? ", " : "", logits[s][i]);
        printf("]");
    }
    printf("]}\n");
    llama_free(ctx);
    return 0;
}

static int tokenize(llama_model *model, const char *text) {
    const llama_vocab *vocab = llama_model_get_vocab(model);
    std::vector<llama_token> ids(strlen(text) + 16);
    int n = llama_tokenize(vocab, text, (int32_t) strlen(text), ids.data(), (int32_t) ids.size(),
                           false, true);
    if (n < 0) { fprintf(stderr, "tokenize failed\n"); return 1; }
    ids.resize(n);
    printf("{");
    print_ids("ids", ids);
    printf("}\n");
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s MODEL.gguf generate IDS STEPS | tokenize TEXT\n", argv[0]);
        return 2;
    }
    if (!getenv("GGUF_REFERENCE_LOG"))   // llama.cpp's log on stderr only when asked
        llama_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) { fprintf(stderr, "cannot load %s\n", argv[1]); return 1; }
    int rc = 2;
    if (!strcmp(argv[2], "generate") && argc == 5)
        rc = generate(model, parse_ids(argv[3]), atoi(argv[4]));
    else if (!strcmp(argv[2], "tokenize"))
        rc = tokenize(model, argv[3]);
    llama_model_free(model);
    return rc;
}
