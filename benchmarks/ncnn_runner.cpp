// Runs an ncnn model for benchmarks/peer_ncnn.py (built by peer_ncnn_build.py, never by rvvkit).
//
//   ncnn_runner MODEL.param MODEL.bin INPUT.raw SHAPE REPEAT OUTDIR IN_BLOB OUT_BLOB...
//
// SHAPE is the input's dimensions without the batch, outermost first, joined by 'x': "3x224x224"
// (C x H x W) or "128x512" (tokens x width; ncnn keeps it a 2-D Mat, as pnnx's graph expects).
// Loads the model, reads the float32 tensor from INPUT.raw, runs one warm-up inference
// and then REPEAT more (one thread, ncnn's default options except that fp16/bf16 storage and
// arithmetic are off, so everything is fp32 or ncnn's int8; built with
// -DNCNN_RUNNER_DEFAULT_OPTIONS it keeps ncnn's defaults, fp16 included where the library has
// Zfh/Zvfh: what a K1 user gets), and writes each OUT_BLOB of the
// last inference to OUTDIR/out<i>.raw as flat float32 in (c, d, h, w) order. Counting a run
// with REPEAT=1 minus one with REPEAT=0 gives exactly one inference: loading, the warm-up and
// the file writes are in both.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "net.h"

static bool read_floats(const char* path, std::vector<float>& data, size_t count)
{
    FILE* f = fopen(path, "rb");
    if (!f)
        return false;
    data.resize(count);
    size_t got = fread(data.data(), sizeof(float), count, f);
    fclose(f);
    return got == count;
}

static bool write_mat(const std::string& path, const ncnn::Mat& m)
{
    FILE* f = fopen(path.c_str(), "wb");
    if (!f)
        return false;
    bool ok = m.elempack == 1 && m.elemsize == sizeof(float);
    // A channel's rows are contiguous; channels are cstep apart (padded), so write per channel.
    const size_t per_channel = (size_t)m.w * m.h * m.d;
    for (int q = 0; ok && q < m.c; q++)
    {
        const float* p = m.channel(q);
        ok = fwrite(p, sizeof(float), per_channel, f) == per_channel;
    }
    return fclose(f) == 0 && ok;
}

int main(int argc, char** argv)
{
    if (argc < 9)
    {
        fprintf(stderr, "usage: %s MODEL.param MODEL.bin INPUT.raw SHAPE REPEAT OUTDIR IN_BLOB "
                        "OUT_BLOB...\n", argv[0]);
        return 2;
    }
    int dims[3] = {1, 1, 1}, ndim = 0;     // outermost first
    for (const char* p = argv[4]; *p && ndim < 3; ndim++)
    {
        char* end;
        dims[ndim] = (int)strtol(p, &end, 10);
        p = *end == 'x' ? end + 1 : end;
    }
    const int repeat = atoi(argv[5]);
    const std::string outdir = argv[6];
    const char* in_blob = argv[7];

    ncnn::Net net;
    net.opt.num_threads = 1;
#ifndef NCNN_RUNNER_DEFAULT_OPTIONS
    net.opt.use_fp16_packed = false;
    net.opt.use_fp16_storage = false;
    net.opt.use_fp16_arithmetic = false;
    net.opt.use_bf16_packed = false;
    net.opt.use_bf16_storage = false;
#endif
    if (net.load_param(argv[1]) != 0 || net.load_model(argv[2]) != 0)
    {
        fprintf(stderr, "cannot load %s / %s\n", argv[1], argv[2]);
        return 1;
    }

    const size_t count = (size_t)dims[0] * dims[1] * dims[2];
    std::vector<float> data;
    if (ndim < 1 || count == 0 || !read_floats(argv[3], data, count))
    {
        fprintf(stderr, "cannot read a %s tensor of floats from %s\n", argv[4], argv[3]);
        return 1;
    }
    ncnn::Mat input;
    if (ndim == 3)
    {
        const int c = dims[0], h = dims[1], w = dims[2];
        input.create(w, h, c);
        for (int q = 0; q < c; q++)   // channels are cstep apart
            memcpy(input.channel(q), &data[(size_t)q * h * w], sizeof(float) * h * w);
    }
    else
    {
        if (ndim == 2)
            input.create(dims[1], dims[0]);
        else
            input.create(dims[0]);
        memcpy(input.data, data.data(), sizeof(float) * count);
    }

    std::vector<ncnn::Mat> outs(argc - 8);
    for (int r = 0; r < 1 + repeat; r++)
    {
        ncnn::Extractor ex = net.create_extractor();
        if (ex.input(in_blob, input) != 0)
        {
            fprintf(stderr, "no input blob %s\n", in_blob);
            return 1;
        }
        for (int i = 8; i < argc; i++)
        {
            if (ex.extract(argv[i], outs[i - 8]) != 0)
            {
                fprintf(stderr, "cannot extract blob %s\n", argv[i]);
                return 1;
            }
        }
    }
    for (size_t i = 0; i < outs.size(); i++)
    {
        char name[32];
        snprintf(name, sizeof(name), "/out%d.raw", (int)i);
        if (!write_mat(outdir + name, outs[i]))
        {
            fprintf(stderr, "cannot write %s%s\n", outdir.c_str(), name);
            return 1;
        }
    }
    return 0;
}
