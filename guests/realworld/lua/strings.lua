-- string handling: patterns, gsub, format, byte/char, rep, reverse, utf8
local s = "The quick brown fox jumps over the lazy dog"
local words = {}
for w in s:gmatch("%a+") do words[#words + 1] = w:lower() end
table.sort(words)
print(#words, table.concat(words, ","))
print((s:gsub("o", "0")), select(2, s:gsub("o", "0")))
print(string.format("%5d|%-5s|%.3f|%x|%q", 42, "ab", math.pi, 255, "a\nb"))
print(s:upper():reverse():sub(1, 10), s:find("fox"), s:match("(%a+) dog"))
local t = {}
for i = 1, #s do t[#t + 1] = string.char((s:byte(i) + 1) % 256) end
print(table.concat(t):sub(1, 20), ("ab"):rep(3, "-"), utf8.char(72, 228, 8364, 128512), utf8.len("häll€"))
return 7
