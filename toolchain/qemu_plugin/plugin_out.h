/*
 * plugin_out.h - what each counting plugin (qemu_icount.c, qemu_iclass.c, qemu_vcount.c) does
 * with its one JSON line at exit: write it to out=PATH, or to QEMU's log where no path was
 * given. A count that cannot be written is reported on stderr, never lost silently (a failed
 * write or close included). Header-only, included once per plugin after the plugin has
 * declared qemu_plugin_outs (qemu-plugin.h, or the plugin's own declaration for QEMU 7.2's
 * API); rvvkit/runtime/counting/icount.py pastes it in, so the cache key covers it.
 */
#ifndef PLUGIN_OUT_H
#define PLUGIN_OUT_H
#include <errno.h>
#include <stdio.h>
#include <string.h>

static void plugin_emit(const char *who, const char *out_path, const char *line)
{
    if (!out_path) {
        qemu_plugin_outs(line);
        return;
    }
    FILE *f = fopen(out_path, "w");
    int ok = f && fputs(line, f) >= 0;
    if (f && fclose(f) != 0)
        ok = 0;
    if (!ok)
        fprintf(stderr, "%s: cannot write %s: %s\n", who, out_path, strerror(errno));
}
#endif
