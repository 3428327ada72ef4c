-- render.lua - the template renderer.
--
-- render(dir, name, values) reads template `name` under directory `dir` and
-- returns self-contained source text:
--   * `${name}` is replaced by values[name] (an integer, a number or a
--     string); a missing name or a value of another type is an error that
--     names the template file and line. `$${` writes a literal `${`.
--   * a line `#include "path"` whose file exists under `dir` (looked up next
--     to the including file first, then from `dir`) is replaced by that
--     file's rendered text between `// ---- begin path` and `// ---- end path`
--     lines, recursively; each file is inlined once per render, later
--     includes of it become `// ---- already included: path`. Other include
--     lines (`#include <...>`, files not under `dir`) are left alone.
-- The result is what gets hashed and compiled (NVRTC, no include paths), so
-- it must not depend on anything but the files and the values.
-- Errors are raised with level 0: the message is the whole story.

local M = {}

-- A reader: path -> file text, or nil when the file cannot be read.
-- Remembers what it read, so one reader shared by many renders reads each
-- file once.
function M.file_reader()
  local cache = {}
  return function(path)
    local text = cache[path]
    if text == nil then
      local f = io.open(path, "rb")
      if f then
        text = f:read("a")
        f:close()
      end
      cache[path] = text or false
    end
    return text or nil
  end
end

local function fail(fmt, ...)
  error(string.format(fmt, ...), 0)
end

-- "a/./b/../c.h" -> "a/c.h"; nil when the path leaves the root.
local function normalize(path)
  local parts = {}
  for part in path:gmatch("[^/]+") do
    if part == ".." then
      if #parts == 0 then
        return nil
      end
      parts[#parts] = nil
    elseif part ~= "." then
      parts[#parts + 1] = part
    end
  end
  return table.concat(parts, "/")
end

local function dirname(path)
  return path:match("^(.*)/[^/]*$") or ""
end

local function value_text(values, name, where)
  local v = values[name]
  if v == nil then
    fail("%s: template parameter '%s' has no value", where, name)
  end
  if math.type(v) == "integer" then
    return string.format("%d", v)
  elseif math.type(v) == "float" then
    return string.format("%.17g", v)
  elseif type(v) == "string" then
    return v
  end
  fail("%s: template parameter '%s' is a %s, not a string or number", where, name, type(v))
end

-- Replaces ${name} and $${ in one line.
local function substitute(line, values, where)
  if not line:find("$", 1, true) then
    return line
  end
  local out, i = {}, 1
  while true do
    local s = line:find("$", i, true)
    if not s then
      out[#out + 1] = line:sub(i)
      break
    end
    out[#out + 1] = line:sub(i, s - 1)
    if line:sub(s, s + 2) == "$${" then
      out[#out + 1] = "${"
      i = s + 3
    elseif line:sub(s, s + 1) == "${" then
      local e = line:find("}", s + 2, true)
      if not e then
        fail("%s: '${' without a closing '}' (write '$${' for a literal '${')", where)
      end
      local name = line:sub(s + 2, e - 1)
      if not name:match("^[%a_][%w_]*$") then
        fail("%s: '${%s}' is not a parameter name", where, name)
      end
      out[#out + 1] = value_text(values, name, where)
      i = e + 1
    else
      out[#out + 1] = "$"
      i = s + 1
    end
  end
  return table.concat(out)
end

-- Calls fn(line, eol) for each line of `text`; eol is "\n" or "" (last line).
local function each_line(text, fn)
  local pos = 1
  while pos <= #text do
    local nl = text:find("\n", pos, true)
    if nl then
      fn(text:sub(pos, nl - 1), "\n")
      pos = nl + 1
    else
      fn(text:sub(pos), "")
      pos = #text + 1
    end
  end
end

function M.render(dir, name, values, read)
  if type(dir) ~= "string" or type(name) ~= "string" then
    fail("render: template directory and name must be strings")
  end
  if type(values) ~= "table" then
    fail("render: values of template '%s' must be a table", name)
  end
  read = read or M.file_reader()
  local out, seen = {}, {}

  local function emit(text)
    out[#out + 1] = text
  end

  -- The include target of `path` seen from file `rel`, or nil.
  local function resolve(rel, path)
    local base = dirname(rel)
    local candidates = { base ~= "" and normalize(base .. "/" .. path) or normalize(path), normalize(path) }
    for _, c in ipairs(candidates) do
      if c and c ~= "" and read(dir .. "/" .. c) then
        return c
      end
    end
    return nil
  end

  local function expand(rel)
    local text = read(dir .. "/" .. rel)
    if not text then
      fail("template '%s' not found under '%s'", rel, dir)
    end
    seen[rel] = true
    local lineno = 0
    each_line(text, function(line, eol)
      lineno = lineno + 1
      local path = line:match('^%s*#%s*include%s*"([^"]+)"')
      local target = path and resolve(rel, path)
      if not target then
        emit(substitute(line, values, rel .. ":" .. lineno) .. eol)
      elseif seen[target] then
        emit("// ---- already included: " .. target .. "\n")
      else
        emit("// ---- begin " .. target .. "\n")
        expand(target)
        if out[#out]:sub(-1) ~= "\n" then
          emit("\n")
        end
        emit("// ---- end " .. target .. "\n")
      end
    end)
  end

  local top = normalize(name)
  if not top or top == "" then
    fail("template name '%s' is not a path under the templates directory", name)
  end
  expand(top)
  return table.concat(out)
end

return M
