-- a small numeric loop: primes by sieve, integer/float arithmetic, math library
local N = 3000
local sieve, count, sum = {}, 0, 0
for i = 2, N do
  if not sieve[i] then
    count = count + 1; sum = sum + i
    for j = i * i, N, i do sieve[j] = true end
  end
end
print(count, sum)
local x, fib = 0.0, {1, 1}
for i = 1, 200 do x = x + math.sin(i) * math.sqrt(i) end
for i = 3, 80 do fib[i] = fib[i - 1] + fib[i - 2] end
print(string.format("%.10f", x), fib[80], math.maxinteger // 7, 7 // 2, 7 / 2, 2^53, 10 % -3)
print(math.floor(-3.5), math.ceil(-3.5), math.fmod(7, -3), math.tointeger(3.0), math.type(1), math.type(1.0), 1e15, 1e16, 0.1 + 0.2)
math.randomseed(42)
local r = {}
for i = 1, 5 do r[i] = math.random(1, 100) end
print(table.concat(r, " "))
return count % 256
