-- tables: arrays, records, metatables, closures, sorting with a comparator
local Point = {}
Point.__index = Point
function Point.new(x, y) return setmetatable({x = x, y = y}, Point) end
function Point.__add(a, b) return Point.new(a.x + b.x, a.y + b.y) end
function Point:__tostring() return "(" .. self.x .. "," .. self.y .. ")" end
local acc = Point.new(0, 0)
for i = 1, 100 do acc = acc + Point.new(i, i * i) end
print(tostring(acc))
local people = {}
for i = 1, 50 do people[i] = {name = "p" .. (i * 37 % 50), age = (i * 13) % 41} end
table.sort(people, function(a, b) if a.age ~= b.age then return a.age < b.age end return a.name < b.name end)
local out = {}
for i = 1, 10 do out[i] = people[i].name .. ":" .. people[i].age end
print(table.concat(out, " "))
local counts, keys = {}, {}
for w in ("a b c a b a d e d a"):gmatch("%a") do counts[w] = (counts[w] or 0) + 1 end
for k in pairs(counts) do keys[#keys + 1] = k end
table.sort(keys)
for _, k in ipairs(keys) do io.write(k, "=", counts[k], " ") end
io.write("\n")
local function counter() local n = 0 return function() n = n + 1 return n end end
local c = counter(); c(); c()
print(c(), #people, select("#", table.unpack({1, 2, 3, nil, 5}, 1, 5)))
local co = coroutine.wrap(function() for i = 1, 3 do coroutine.yield(i * 10) end end)
print(co(), co(), co())
print(pcall(error, {code = 5}), select(2, pcall(error, "boom", 0)))
