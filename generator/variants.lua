-- variants.lua - the variant list of an op for a set of shapes.
--
-- An op module (generator/ops/<op>.lua) provides:
--   kernel_space()                 tuned kernel configs (constraints applied)
--   launch_space(kernel)           launch configs to consider for a kernel
--   defaults()                     {kernel =, launch =} fallbacks, always listed
--   fits(kernel, shape, is_default)            -> ok, reason
--   worth(kernel, launch, shape, is_default)   -> ok, reason
--   variant_name(kernel, launch)   readable and unique
-- The list holds every (kernel, launch) that fits and is worth timing on at
-- least one shape, plus every default, each once (a tuned config equal to a
-- default is the default). Order: defaults, then the kernel space order.

local space = require("space")

local M = {}

local function identity(kernel, launch)
  return space.canonical(kernel) .. "|" .. space.canonical(launch)
end

-- Returns an array of {name, kernel, launch, is_default}.
function M.list(op, shapes)
  local out, index = {}, {}
  local function add(kernel, launch, is_default)
    local id = identity(kernel, launch)
    local at = index[id]
    if at then
      out[at].is_default = out[at].is_default or is_default
      return
    end
    out[#out + 1] = { name = op.variant_name(kernel, launch), kernel = kernel, launch = launch,
      is_default = is_default }
    index[id] = #out
  end

  for _, d in ipairs(op.defaults()) do
    add(d.kernel, d.launch, true)
  end
  for _, kernel in ipairs(op.kernel_space()) do
    local fitting = {}
    for _, s in ipairs(shapes) do
      if op.fits(kernel, s, false) then
        fitting[#fitting + 1] = s
      end
    end
    if #fitting > 0 then
      for _, launch in ipairs(op.launch_space(kernel)) do
        for _, s in ipairs(fitting) do
          if op.worth(kernel, launch, s, false) then
            add(kernel, launch, false)
            break
          end
        end
      end
    end
  end
  return out
end

return M
