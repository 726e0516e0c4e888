-- a runtime error after some output: exit code 1, the message and a traceback on stderr
print("before")
local t = nil
return t.x
