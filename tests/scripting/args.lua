-- args.lua — `arg` holds the command-line arguments.
assert(arg[1] == "one" and arg[2] == "two", "args")
assert(arg[0]:find("args.lua"))
print("args: " .. arg[1] .. " " .. arg[2])
