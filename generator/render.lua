-- render.lua - the template renderer.
--
-- render(dir, name, values) reads template `name` under directory `dir` and
-- returns self-contained source text:
--   * a line `#include "defaults/<file>"` is where the variant's
--     compile-time constants arrive. That file (the template's default
--     prelude) declares them, one `#define ST_P_<NAME> <integer>` line each,
--     at values that let the template compile on its own. In the rendered
--     text the include becomes the same lines, in the same order, with
--     values[<name>] (the name in lower case, an integer) in place of the
--     default, between `// ---- begin prelude <path>` and
--     `// ---- end prelude <path>`; the defaults' comments are left out, so
--     only the names and values are hashed. A name without a value, or a
--     value that is not an integer, is an error naming the defaults file and
--     line. Values the prelude does not name are ignored (an op's
--     families share one table); values given to a template that includes
--     no defaults file are an error, as are two different defaults files.
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

-- Includes of files under this folder are preludes (see above).
local PRELUDE_DIR = "defaults"
-- The prefix of the constants' macros: ST_P_HEAD_DIM carries values.head_dim.
local PRELUDE_PREFIX = "ST_P_"
local PRELUDE_DEFINE = "^%s*#%s*define%s+(" .. PRELUDE_PREFIX .. "[%u%d_]+)%s+(%-?%d+)%s*$"

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

-- Whether a line of a defaults file is one the prelude leaves out: blank,
-- a line comment, or the include guard a header carries for editors.
local function prelude_skips(line)
  return line:match("^%s*$") or line:match("^%s*//") or line:match("^%s*#%s*pragma%s+once%s*$")
end

-- The prelude of defaults file `rel` (text `text`): its #define lines with
-- the variant's values.
local function prelude(rel, text, values)
  local out, defined, lineno = {}, {}, 0
  each_line(text, function(line)
    lineno = lineno + 1
    if prelude_skips(line) then
      return
    end
    local where = rel .. ":" .. lineno
    local macro = line:match(PRELUDE_DEFINE)
    if not macro then
      fail("%s: a defaults file holds only '#define %s<NAME> <integer>' lines, comments and '#pragma once'", where,
        PRELUDE_PREFIX)
    end
    if defined[macro] then
      fail("%s: %s is defined twice (first on line %d)", where, macro, defined[macro])
    end
    defined[macro] = lineno
    local name = macro:sub(#PRELUDE_PREFIX + 1):lower()
    local v = values[name]
    if v == nil then
      fail("%s: template parameter '%s' has no value", where, name)
    end
    if math.type(v) ~= "integer" then
      fail("%s: template parameter '%s' is a %s, not an integer", where, name, math.type(v) or type(v))
    end
    out[#out + 1] = string.format("#define %s %d\n", macro, v)
  end)
  return table.concat(out)
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
  local prelude_of = nil -- the defaults file whose prelude was written

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
        emit(line .. eol)
      elseif seen[target] then
        emit("// ---- already included: " .. target .. "\n")
      elseif target:sub(1, #PRELUDE_DIR + 1) == PRELUDE_DIR .. "/" then
        if prelude_of then
          fail("%s:%d: a second prelude, %s (the first: %s)", rel, lineno, target, prelude_of)
        end
        seen[target], prelude_of = true, target
        emit("// ---- begin prelude " .. target .. "\n")
        emit(prelude(target, read(dir .. "/" .. target), values))
        emit("// ---- end prelude " .. target .. "\n")
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
  if not prelude_of and next(values) ~= nil then
    local names = {}
    for k in pairs(values) do
      names[#names + 1] = tostring(k)
    end
    table.sort(names)
    fail("template '%s' includes no %s/ file, so values %s have nowhere to go", top, PRELUDE_DIR,
      table.concat(names, ", "))
  end
  return table.concat(out)
end

return M
