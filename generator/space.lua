-- space.lua - generic helpers for variant spaces: cartesian products of
-- parameter domains, filtering by a constraint, canonical key text.
--
-- Everything here is a pure function of its arguments. Orders are fixed
-- (keys sorted bytewise, domains in the order written) so that two runs
-- produce the same lists, names and ids.

local M = {}

-- Bytewise string order. Lua's `<` on strings follows the C locale's
-- collation (strcoll); keys must sort the same everywhere, as the C side's
-- strcmp does.
function M.bytewise_less(a, b)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = a:byte(i), b:byte(i)
    if x ~= y then
      return x < y
    end
  end
  return #a < #b
end

-- The keys of table `t`, sorted bytewise.
function M.sorted_keys(t)
  local keys = {}
  for k in pairs(t) do
    if type(k) ~= "string" then
      error("parameter names must be strings, got " .. type(k), 2)
    end
    keys[#keys + 1] = k
  end
  table.sort(keys, M.bytewise_less)
  return keys
end

-- Every combination of the domains in `domains` (name -> array of values),
-- as fresh tables. The first name (bytewise) varies slowest.
function M.product(domains)
  local keys = M.sorted_keys(domains)
  for _, k in ipairs(keys) do
    if type(domains[k]) ~= "table" or #domains[k] == 0 then
      error("domain of '" .. k .. "' must be a non-empty array", 2)
    end
  end
  local out = {}
  local point = {}
  local function walk(i)
    if i > #keys then
      local copy = {}
      for k, v in pairs(point) do
        copy[k] = v
      end
      out[#out + 1] = copy
      return
    end
    for _, v in ipairs(domains[keys[i]]) do
      point[keys[i]] = v
      walk(i + 1)
    end
  end
  walk(1)
  return out
end

-- Splits `points` by `constraint(point) -> ok, reason`. Returns the kept
-- points and the rejected ones as {point = p, reason = text}.
function M.filter(points, constraint)
  local kept, rejected = {}, {}
  for _, p in ipairs(points) do
    local ok, reason = constraint(p)
    if ok then
      kept[#kept + 1] = p
    else
      rejected[#rejected + 1] = { point = p, reason = reason or "rejected" }
    end
  end
  return kept, rejected
end

-- A parameter value as canonical text: integers in decimal, strings as is.
function M.value_text(v, name)
  if math.type(v) == "integer" then
    return string.format("%d", v)
  elseif type(v) == "string" then
    return v
  end
  error(string.format("parameter '%s' has a %s value; only integers and strings are allowed", name,
    math.type(v) or type(v)), 2)
end

-- "k1=v1,k2=v2" over `keys` (all keys of `t` when nil), sorted bytewise.
function M.canonical(t, keys)
  local names = {}
  if keys then
    for _, k in ipairs(keys) do
      names[#names + 1] = k
    end
    table.sort(names, M.bytewise_less)
  else
    names = M.sorted_keys(t)
  end
  local parts = {}
  for _, k in ipairs(names) do
    if t[k] == nil then
      error("parameter '" .. k .. "' is missing", 2)
    end
    parts[#parts + 1] = k .. "=" .. M.value_text(t[k], k)
  end
  return table.concat(parts, ",")
end

-- A kernel config from outside (C, the database) for op `op_name`: every
-- parameter of `domains` present and in its domain, no others, and within
-- `constraint` (a function returning ok, why).
function M.check_kernel(k, domains, constraint, op_name)
  for _, name in ipairs(M.sorted_keys(domains)) do
    if k[name] == nil then
      return false, string.format("kernel parameter '%s' is missing", name)
    end
    if not M.contains(domains[name], k[name]) then
      return false, string.format("kernel parameter %s=%s is not one of its values", name, tostring(k[name]))
    end
  end
  local unknown = M.unknown_key(k, domains)
  if unknown then
    return false, string.format("'%s' is not a kernel parameter of %s", unknown, op_name)
  end
  return constraint(k)
end

-- A shape from outside for op `op_name`: every field of `fields` present
-- and no key outside `known` (the fields and the facts such as peer_us).
function M.check_shape_fields(s, fields, known, op_name)
  for _, f in ipairs(fields) do
    if s[f] == nil then
      return false, string.format("shape field '%s' is missing", f)
    end
  end
  local unknown = M.unknown_key(s, known)
  if unknown then
    return false, string.format("'%s' is not a shape field of %s", unknown, op_name)
  end
  return true
end

-- The first of `ranges` ({field, lo, hi}; hi nil: no upper bound) whose
-- shape field is not an integer in range, as a message; nil if all are.
function M.int_fields_outside(s, ranges)
  for _, r in ipairs(ranges) do
    local f, lo, hi = r[1], r[2], r[3]
    local v = s[f]
    if math.type(v) ~= "integer" or v < lo or (hi and v > hi) then
      return string.format("shape field %s=%s is outside %d..%s", f, tostring(v), lo, hi and tostring(hi) or "")
    end
  end
  return nil
end

-- The facts a shape may carry beside its fields, in neither of its keys: the
-- peer's time (docs/method.md) and the device it was measured on
-- (`sparsetune bench` gives a speed-up only on that device).
local PEER_FACTS = { "peer_us", "peer_device" }

-- The keys a shape of an op may hold: its `fields` and the peer's facts.
function M.shape_field_set(fields)
  local set = {}
  for _, list in ipairs({ fields, PEER_FACTS }) do
    for _, f in ipairs(list) do
      set[f] = true
    end
  end
  return set
end

-- The optional peer facts of a shape: none, or peer_us a positive time
-- and peer_device the non-empty name of the device it was measured on (a
-- time means nothing without its device).
function M.check_peer(s)
  -- not (x > 0), not x <= 0: NaN is no positive time either
  if s.peer_us ~= nil and not ((tonumber(s.peer_us) or 0) > 0) then -- luacheck: ignore 581
    return false, string.format("shape field peer_us=%s is not a positive time", tostring(s.peer_us))
  end
  if s.peer_device ~= nil and (type(s.peer_device) ~= "string" or s.peer_device == "") then
    return false, string.format("shape field peer_device=%s is not a device name", tostring(s.peer_device))
  end
  if (s.peer_us == nil) ~= (s.peer_device == nil) then
    return false, "shape fields peer_us and peer_device go together (the peer's time and the device it was measured on)"
  end
  return true
end

-- The query tokens of a varlen batch "q_len:prefix;...", or nil and why.
-- An item "q_len:prefix*count" stands for count equal requests (a batch of
-- hundreds of short requests fits a shape field); at most 4096 in all, as
-- the tuner's harness (tuner/ops/case_inputs.c) takes.
local MAX_REQUESTS = 4096
function M.request_tokens(reqs)
  local total, n = 0, 0
  local bad = string.format("shape field reqs=%s is not a list of q_len:prefix[*count]", tostring(reqs))
  for item in string.gmatch(tostring(reqs) .. ";", "([^;]*);") do
    local q, rest = string.match(item, "^(%d+):%d+(.*)$")
    local count = rest == "" and 1 or math.tointeger(tonumber(string.match(rest or "", "^%*(%d+)$")))
    q = math.tointeger(tonumber(q))
    if not q or not count or count < 1 then
      return nil, bad
    end
    n = n + count
    if n > MAX_REQUESTS then
      return nil, string.format("shape field reqs=%s lists more than %d requests", tostring(reqs), MAX_REQUESTS)
    end
    total = total + q * count
  end
  return total
end

-- A varlen shape's requests and batch: reqs is a list of q_len:prefix whose
-- query tokens are B, and the peer's time (if any) is valid.
function M.check_varlen(s)
  local total, bad = M.request_tokens(s.reqs)
  if not total then
    return false, bad
  end
  if total ~= s.B then
    return false, string.format("shape field B=%d is not the %d query tokens of reqs=%s", s.B, total, s.reqs)
  end
  return M.check_peer(s)
end

-- Launch parameters of an op that has none: `l` must be empty.
function M.check_no_launch(l, op_name)
  local unknown = M.unknown_key(l, {})
  if unknown then
    return false, string.format("'%s' is not a launch parameter of %s (it has none)", unknown, op_name)
  end
  return true
end

-- Gives an op module its check_kernel (every parameter of kernel_domains
-- present, in its domain, no others, within op.constraint), check_launch
-- and launch_space. `launch` is nil for an op without launch parameters
-- (one empty launch), or {name = , max = , choices = } for one integer
-- launch parameter in 0..max, timed at `choices`.
function M.define_checks(op, launch)
  function op.check_kernel(k)
    return M.check_kernel(k, op.kernel_domains, op.constraint, op.name)
  end
  if not launch then
    function op.check_launch(l)
      return M.check_no_launch(l, op.name)
    end
    function op.launch_space(_kernel)
      return { {} }
    end
    return
  end
  local known = { [launch.name] = true }
  function op.check_launch(l)
    local unknown = M.unknown_key(l, known)
    if unknown then
      return false, string.format("'%s' is not a launch parameter of %s", unknown, op.name)
    end
    local v = l[launch.name]
    if math.type(v) ~= "integer" or v < 0 or v > launch.max then
      return false, string.format("launch parameter %s=%s is outside 0..%d", launch.name, tostring(v), launch.max)
    end
    return true
  end
  function op.launch_space(_kernel)
    local out = {}
    for _, v in ipairs(launch.choices) do
      out[#out + 1] = { [launch.name] = v }
    end
    return out
  end
end

-- Gives an op module its shape_key and dispatch_key (the op's name, then
-- the canonical text of those fields of a shape) and applies (below).
function M.define_keys(op, shape_fields, dispatch_fields)
  function op.shape_key(s)
    return op.name .. ":" .. M.canonical(s, shape_fields)
  end
  function op.dispatch_key(s)
    return op.name .. ":" .. M.canonical(s, dispatch_fields)
  end
  function op.applies(k, l, s, is_default)
    return M.applies(op, k, l, s, is_default)
  end
end

-- op.fits, then op.worth: whether variant (k, l) of `op` is generated for
-- shape s.
function M.applies(op, k, l, s, is_default)
  local ok, why = op.fits(k, s, is_default)
  if not ok then
    return false, why
  end
  return op.worth(k, l, s, is_default)
end

-- The bytewise-first key of `t` that `known` (name -> anything) lacks, or nil.
function M.unknown_key(t, known)
  local first
  for k in pairs(t) do
    if known[k] == nil then
      local name = tostring(k)
      if first == nil or M.bytewise_less(name, first) then
        first = name
      end
    end
  end
  return first
end

-- Whether `v` is one of the values of array `list`.
function M.contains(list, v)
  for _, x in ipairs(list) do
    if x == v then
      return true
    end
  end
  return false
end

return M
