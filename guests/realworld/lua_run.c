/* lua_run: the Lua 5.4 interpreter (the copy in lupa's sdist, third-party/lua54/;
 * scripts/build_realworld.sh fetches it: none of it is in this repository) running the
 * program's input as a Lua chunk.
 *
 * Input: Lua source text (a chunk named "=input"; binary chunks are refused).
 * Output: what the script writes with print / io.write (stdout = the proved output);
 * io.stderr goes to fd 2.
 * Exit code: the chunk's first return value if it is an integer (mod 256), 0 otherwise;
 * 1 if it fails to load or raises an error (the message, with a traceback, on stderr).
 *
 * All standard libraries are opened; those that need an operating system answer as on a
 * machine without one: io.open and io.popen fail, os.time and os.clock return nil /
 * raise (picolibc's time() and clock() fail), os.getenv returns nil.
 *
 * Built with scripts/rv32-cc (picolibc): scripts/build_realworld.sh lua.
 */
#include <stdio.h>
#include <stdlib.h>

#include "lauxlib.h"
#include "lua.h"
#include "lualib.h"

static int traceback(lua_State *L)
{
    const char *msg = lua_tostring(L, 1);
    if (msg == NULL)
        msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    luaL_traceback(L, L, msg, 1);
    return 1;
}

static char *read_all(size_t *len)
{
    size_t cap = 4096, n = 0, r;
    char *buf = malloc(cap);
    while (buf && (r = fread(buf + n, 1, cap - n, stdin)) > 0) {
        n += r;
        if (n == cap)
            buf = realloc(buf, cap *= 2);
    }
    *len = n;
    return buf;
}

int main(void)
{
    size_t len;
    char *src = read_all(&len);
    lua_State *L = luaL_newstate();
    if (src == NULL || L == NULL) {
        fputs("lua: out of memory\n", stderr);
        return 1;
    }
    luaL_openlibs(L);
    lua_pushcfunction(L, traceback);
    if (luaL_loadbufferx(L, src, len, "=input", "t") != LUA_OK ||
        lua_pcall(L, 0, 1, 1) != LUA_OK) {
        fprintf(stderr, "lua: %s\n", lua_tostring(L, -1));
        lua_close(L);
        return 1;
    }
    int isnum = 0;
    lua_Integer code = lua_tointegerx(L, -1, &isnum);
    lua_close(L);
    free(src);
    return isnum ? (int)(code & 255) : 0;
}
