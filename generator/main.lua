-- main.lua - the generator's entry point (loaded by tuner/generator.c).
--
-- new(templates_dir, op_names) returns a generator over the ops named (each
-- op's module is ops/<name>.lua) whose functions the C bridge calls:
--   ops()                       op names, sorted
--   suites()                    suite names, sorted
--   suite(name, op)             shapes of suite `name` (op nil: every op) as
--                               {op, key, dispatch_key, params}
--   variants(op, shapes)        the variants worth timing on `shapes` plus the
--                               op's defaults, and the rendered sources:
--                               list of {name, kernel, launch, is_default,
--                               source = index into sources}, sources
--   applies(op, kernel, launch, is_default, shape) -> boolean, reason
--   render(op, kernel)          the rendered source of one kernel config
-- Parameters coming from C are text; decimal integers are read as integers.
-- Errors are Lua errors whose message says what is wrong with what.

local space = require("space")
local render = require("render")
local suites = require("suites")
local variants = require("variants")

-- The op modules (ops/<name>.lua) of the names new() is given: the
-- runtime's one list of ops, which the C bridge passes.
local OPS = {}

local M = {}

local function fail(fmt, ...)
  error(string.format(fmt, ...), 0)
end

local function op_names()
  return space.sorted_keys(OPS)
end

local function op_of(name)
  local op = OPS[name]
  if not op then
    fail("unknown op '%s' (known: %s)", tostring(name), table.concat(op_names(), ", "))
  end
  return op
end

-- Parameters as C passes them (all text) -> Lua values: text that is the
-- canonical decimal form of an integer becomes that integer, as
-- st_params_to_json writes it as a number.
local function from_text(t)
  local out = {}
  for k, v in pairs(t) do
    local n = type(v) == "string" and tonumber(v, 10)
    if n and math.type(n) == "integer" and string.format("%d", n) == v then
      out[k] = n
    else
      out[k] = v
    end
  end
  return out
end

local function shape_from_c(op, text, what)
  local s = from_text(text)
  local ok, why = op.check_shape(s)
  if not ok then
    fail("%s of op %s: %s", what, op.name, why)
  end
  return s
end

local function kernel_from_c(op, text)
  local k = from_text(text)
  local ok, why = op.check_kernel(k)
  if not ok then
    fail("%s kernel config: %s", op.name, why)
  end
  return k
end

-- The template of a kernel: an op with several families names it per kernel.
local function template_of(op, kernel)
  return op.template_of and op.template_of(kernel) or op.template
end

function M.new(templates_dir, names)
  if type(templates_dir) ~= "string" or templates_dir == "" then
    fail("generator needs the templates directory")
  end
  if type(names) ~= "table" or #names == 0 then
    fail("generator needs the list of op names")
  end
  for _, name in ipairs(names) do
    if type(name) ~= "string" or not name:match("^[a-z][a-z0-9_]*$") then
      fail("op name '%s' is not a lower-case identifier", tostring(name))
    end
    OPS[name] = require("ops." .. name)
  end
  local self = {}

  function self.ops()
    return op_names()
  end

  function self.suites()
    return suites.names()
  end

  -- op_name: nil (every op), one op, or a comma-separated list of ops.
  function self.suite(name, op_name)
    local wanted = nil
    if op_name ~= nil then
      wanted = {}
      for one in string.gmatch(op_name .. ",", "([^,]*),") do
        op_of(one)
        wanted[one] = true
      end
    end
    local rows = suites.get(name)
    if not rows then
      fail("unknown suite '%s' (known: %s; and shapes drawn from a seed: random-decode:SEED:N, random-prefill:SEED:N)",
        tostring(name), table.concat(suites.names(), ", "))
    end
    local out, seen = {}, {}
    for i, row in ipairs(rows) do
      local op = op_of(row.op)
      local ok, why = op.check_shape(row.shape)
      if not ok then
        fail("suite '%s', shape %d: %s", name, i, why)
      end
      local key = op.shape_key(row.shape)
      if seen[key] then
        fail("suite '%s' lists shape %s twice", name, key)
      end
      seen[key] = true
      if wanted == nil or wanted[row.op] then
        out[#out + 1] = { op = row.op, key = key, dispatch_key = op.dispatch_key(row.shape), params = row.shape }
      end
    end
    return out
  end

  function self.variants(op_name, shapes_text)
    local op = op_of(op_name)
    local shapes = {}
    for i, text in ipairs(shapes_text) do
      shapes[i] = shape_from_c(op, text, "shape " .. i)
    end
    local list = variants.list(op, shapes)
    local read = render.file_reader() -- one per call: template edits show up on the next call
    local sources, source_of = {}, {}
    for _, v in ipairs(list) do
      local kid = space.canonical(v.kernel)
      if not source_of[kid] then
        local template = template_of(op, v.kernel)
        sources[#sources + 1] = render.render(templates_dir, template, op.render_values(v.kernel), read)
        source_of[kid] = #sources
      end
      v.source = source_of[kid]
    end
    return list, sources
  end

  function self.applies(op_name, kernel_text, launch_text, is_default, shape_text)
    local op = op_of(op_name)
    local kernel = kernel_from_c(op, kernel_text)
    local launch = from_text(launch_text)
    local ok, why = op.check_launch(launch)
    if not ok then
      fail("%s launch config: %s", op.name, why)
    end
    return op.applies(kernel, launch, shape_from_c(op, shape_text, "shape"), is_default)
  end

  function self.render(op_name, kernel_text)
    local op = op_of(op_name)
    local kernel = kernel_from_c(op, kernel_text)
    return render.render(templates_dir, template_of(op, kernel), op.render_values(kernel))
  end

  return self
end

return M
