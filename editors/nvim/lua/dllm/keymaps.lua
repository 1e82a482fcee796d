--- The Insert-mode keymaps (accept, accept_word, accept_line, next, prev, dismiss), on
--- Neovim's `vim.lsp.inline_completion` (0.12+) or on `dllm.ghost` (the fallback). Each is an
--- expr mapping that types its own key when there is nothing to act on.

local M = {}

local function map_native()
  local ic = vim.lsp.inline_completion
  local function accept_part(kind)
    return function()
      local ok = ic.get({
        on_accept = function(item)
          require('dllm.ghost').apply_native(item, kind)
        end,
      })
      return not ok
    end
  end
  return {
    accept = function()
      return not ic.get()
    end,
    accept_word = accept_part('word'),
    accept_line = accept_part('line'),
    next = function()
      vim.schedule(function()
        ic.select({ count = 1 })
      end)
    end,
    prev = function()
      vim.schedule(function()
        ic.select({ count = -1 })
      end)
    end,
  }
end

local function map_fallback()
  local ghost = require('dllm.ghost')
  local function act(fn)
    return function()
      if not ghost.visible() then
        return true
      end
      vim.schedule(fn) -- the buffer cannot change inside an expr mapping
      return false
    end
  end
  return {
    accept = act(function()
      ghost.accept('all')
    end),
    accept_word = act(function()
      ghost.accept('word')
    end),
    accept_line = act(function()
      ghost.accept('line')
    end),
    next = function()
      vim.schedule(function()
        ghost.cycle(1)
      end)
    end,
    prev = function()
      vim.schedule(function()
        ghost.cycle(-1)
      end)
    end,
    dismiss = act(function()
      ghost.clear()
    end),
  }
end

--- Maps keys ({ action = lhs }, or false: none) for mode 'native' or 'fallback'.
function M.set(mode, keys)
  if not keys then
    return
  end
  local actions = mode == 'native' and map_native() or map_fallback()
  for action, lhs in pairs(keys) do
    local fn = actions[action]
    if lhs and fn then
      vim.keymap.set('i', lhs, function()
        local passthrough = fn()
        if passthrough == true then
          return vim.keycode and vim.keycode(lhs)
            or vim.api.nvim_replace_termcodes(lhs, true, true, true)
        end
        return ''
      end, { expr = true, replace_keycodes = false, desc = 'dllm: ' .. action })
    end
  end
end

return M
