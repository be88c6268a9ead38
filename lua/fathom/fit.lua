-- fathom.fit: small bounded, deterministic fits of a few parameters to measurements
-- (`fathom calibrate`, `fathom validate --fit`). The model is evaluated in C; this only
-- chooses where to evaluate it. No randomness: the same inputs give the same fit.
local M = {}

-- golden(f, lo, hi, iters) -> x, f(x): golden-section search for the minimum of f over
-- [lo, hi] (Kiefer 1953; Press et al., Numerical Recipes 3rd ed., 10.2). Each iteration
-- shrinks the bracket by 0.618 and costs one evaluation of f.
function M.golden(f, lo, hi, iters)
  local r = (math.sqrt(5) - 1) / 2
  local a, b = lo, hi
  local c, d = b - r * (b - a), a + r * (b - a)
  local fc, fd = f(c), f(d)
  for _ = 1, iters do
    if fc < fd then
      b, d, fd = d, c, fc
      c = b - r * (b - a)
      fc = f(c)
    else
      a, c, fc = c, d, fd
      d = a + r * (b - a)
      fd = f(d)
    end
  end
  if fc < fd then return c, fc end
  return d, fd
end

-- minimize(f, params [, opts]) -> x {name = value}, f(x), evaluations: coordinate descent,
-- a golden-section search per parameter inside its bounds, repeated until a round moves
-- no parameter by more than opts.tol (default 1e-3) or after opts.rounds (default 4).
-- params: list of {name, lo, hi, start}; f(x) takes the table x. The start point is kept
-- when nothing beats it (a flat loss leaves the parameter where it was).
function M.minimize(f, params, opts)
  opts = opts or {}
  local tol, rounds, iters = opts.tol or 1e-3, opts.rounds or 4, opts.iters or 16
  local x, evals = {}, 0
  for _, p in ipairs(params) do x[p.name] = math.min(p.hi, math.max(p.lo, p.start or (p.lo + p.hi) / 2)) end
  local function g(t) evals = evals + 1 return f(t) end
  local best = g(x)
  for _ = 1, rounds do
    local moved = 0
    for _, p in ipairs(params) do
      local old = x[p.name]
      local v, fv = M.golden(function(t)
        x[p.name] = t
        return g(x)
      end, p.lo, p.hi, iters)
      if fv < best then
        x[p.name], best = v, fv
        moved = math.max(moved, math.abs(v - old))
      else
        x[p.name] = old
      end
    end
    if moved <= tol then break end
  end
  return x, best, evals
end

-- nelder_mead(f, params, x0 [, opts]) -> x, f(x), evaluations: the downhill simplex (Nelder &
-- Mead 1965; coefficients 1, 2, 0.5, 0.5 as in Gao & Han 2012 for low dimension) started at
-- x0 with a step of opts.step (default 0.05) per parameter, every vertex clamped to the
-- bounds. It follows a valley across parameters that trade off against each other (GEMM and
-- attention efficiency both set compute time), where coordinate steps crawl. Stops when the
-- simplex's values agree to opts.ftol (default 1e-6) or after opts.max_evals (default 150).
function M.nelder_mead(f, params, x0, opts)
  opts = opts or {}
  local n, step, ftol, max_evals = #params, opts.step or 0.05, opts.ftol or 1e-6, opts.max_evals or 150
  local evals = 0
  local function clamp(v)
    local x = {}
    for i, p in ipairs(params) do x[i] = math.min(p.hi, math.max(p.lo, v[i])) end
    return x
  end
  local function value(v)
    evals = evals + 1
    local t = {}
    for i, p in ipairs(params) do t[p.name] = v[i] end
    return f(t)
  end
  local simplex = {}
  local start = {}
  for i, p in ipairs(params) do start[i] = x0[p.name] end
  simplex[1] = { x = clamp(start) }
  for j = 1, n do
    local v = {}
    for i = 1, n do v[i] = start[i] end
    -- step inward when the start sits on its upper bound
    v[j] = v[j] + ((v[j] + step <= params[j].hi) and step or -step)
    simplex[j + 1] = { x = clamp(v) }
  end
  for _, s in ipairs(simplex) do s.f = value(s.x) end
  local function order() table.sort(simplex, function(a, b) return a.f < b.f end) end
  while evals < max_evals do
    order()
    if simplex[n + 1].f - simplex[1].f <= ftol then break end
    local c = {}
    for i = 1, n do
      local sum = 0
      for j = 1, n do sum = sum + simplex[j].x[i] end
      c[i] = sum / n
    end
    local worst = simplex[n + 1]
    local function toward(t)
      local v = {}
      for i = 1, n do v[i] = c[i] + t * (worst.x[i] - c[i]) end
      return clamp(v)
    end
    local xr = toward(-1)
    local fr = value(xr)
    if fr < simplex[1].f then
      local xe = toward(-2)
      local fe = value(xe)
      if fe < fr then worst.x, worst.f = xe, fe else worst.x, worst.f = xr, fr end
    elseif fr < simplex[n].f then
      worst.x, worst.f = xr, fr
    else
      local xc = fr < worst.f and toward(-0.5) or toward(0.5)
      local fc = value(xc)
      if fc < math.min(fr, worst.f) then
        worst.x, worst.f = xc, fc
      else
        -- shrink toward the best vertex
        for j = 2, n + 1 do
          local v = {}
          for i = 1, n do v[i] = simplex[1].x[i] + 0.5 * (simplex[j].x[i] - simplex[1].x[i]) end
          simplex[j].x = clamp(v)
          simplex[j].f = value(simplex[j].x)
        end
      end
    end
  end
  order()
  local x = {}
  for i, p in ipairs(params) do x[p.name] = simplex[1].x[i] end
  return x, simplex[1].f, evals
end

-- mean_abs(list) -> the mean of |v| (nil for an empty list).
function M.mean_abs(list)
  if #list == 0 then return nil end
  local s = 0
  for _, v in ipairs(list) do s = s + math.abs(v) end
  return s / #list
end

-- median_abs(list) -> the median of |v| (nil for an empty list).
function M.median_abs(list)
  if #list == 0 then return nil end
  local a = {}
  for i, v in ipairs(list) do a[i] = math.abs(v) end
  table.sort(a)
  local n = #a
  if n % 2 == 1 then return a[(n + 1) // 2] end
  return (a[n // 2] + a[n // 2 + 1]) / 2
end

-- inverse(m) -> the inverse of a small square matrix (list of rows), or nil when it is
-- singular (Gauss-Jordan with partial pivoting).
function M.inverse(m)
  local n = #m
  local a = {}
  for i = 1, n do
    a[i] = {}
    for j = 1, n do a[i][j] = m[i][j] end
    for j = 1, n do a[i][n + j] = (i == j) and 1 or 0 end
  end
  local scale = 0
  for i = 1, n do for j = 1, n do scale = math.max(scale, math.abs(m[i][j])) end end
  for col = 1, n do
    local piv = col
    for r = col + 1, n do if math.abs(a[r][col]) > math.abs(a[piv][col]) then piv = r end end
    if math.abs(a[piv][col]) <= 1e-12 * math.max(scale, 1e-300) then return nil end
    a[col], a[piv] = a[piv], a[col]
    local d = a[col][col]
    for j = 1, 2 * n do a[col][j] = a[col][j] / d end
    for r = 1, n do
      if r ~= col and a[r][col] ~= 0 then
        local k = a[r][col]
        for j = 1, 2 * n do a[r][j] = a[r][j] - k * a[col][j] end
      end
    end
  end
  local out = {}
  for i = 1, n do
    out[i] = {}
    for j = 1, n do out[i][j] = a[i][n + j] end
  end
  return out
end

-- std_errors(residuals, x, names [, h]) -> {name = standard error or nil}: the Gauss-Newton
-- covariance of a least-squares fit at x, s^2 (J'J)^-1 with s^2 = sum r^2 / (n - p)
-- (Seber & Wild, Nonlinear Regression, 2003, 2.1.2), J by central differences of step h
-- (default 1e-3). residuals(x) -> list of residuals, one per measurement. A parameter the
-- residuals do not depend on, or too few measurements (n <= p), gives nil: not determined.
function M.std_errors(residuals, x, names, h)
  h = h or 1e-3
  local p = #names
  local r0 = residuals(x)
  local n = #r0
  local out = {}
  if n <= p then return out end
  local cols = {}
  for j, name in ipairs(names) do
    local v = x[name]
    x[name] = v + h
    local up = residuals(x)
    x[name] = v - h
    local dn = residuals(x)
    x[name] = v
    cols[j] = {}
    for i = 1, n do cols[j][i] = (up[i] - dn[i]) / (2 * h) end
  end
  local jtj = {}
  for a = 1, p do
    jtj[a] = {}
    for b = 1, p do
      local s = 0
      for i = 1, n do s = s + cols[a][i] * cols[b][i] end
      jtj[a][b] = s
    end
  end
  local inv = M.inverse(jtj)
  if not inv then
    -- singular: report the parameters that do move the residuals on their own
    for j, name in ipairs(names) do
      if jtj[j][j] > 0 then
        local s2 = 0
        for i = 1, n do s2 = s2 + r0[i] ^ 2 end
        out[name] = math.sqrt(s2 / (n - p) / jtj[j][j])
      end
    end
    return out
  end
  local s2 = 0
  for i = 1, n do s2 = s2 + r0[i] ^ 2 end
  s2 = s2 / (n - p)
  for j, name in ipairs(names) do
    if inv[j][j] > 0 then out[name] = math.sqrt(s2 * inv[j][j]) end
  end
  return out
end

return M
