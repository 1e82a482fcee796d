--- The dllm client of a buffer, and the client calls that changed between Neovim versions
--- (methods are called with `:` from 0.11 on, with `.` on 0.10). `require('dllm')` re-exports
--- `client`, `request` and `cancel`.

local M = {}

local has_011 = vim.fn.has('nvim-0.11') == 1

--- The dllm client attached to bufnr (0: current), or nil.
function M.client(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  local get = vim.lsp.get_clients or vim.lsp.get_active_clients
  return get({ name = require('dllm').config.name, bufnr = bufnr })[1]
end

--- The current buffer's dllm client; nil, with a warning naming the filetypes, if none.
function M.attached()
  local client = require('dllm').client(0)
  if not client then
    vim.notify(
      'dllm: dllm-infill-ls is not attached to this buffer (filetypes: '
        .. table.concat(require('dllm').config.filetypes, ', ')
        .. ')',
      vim.log.levels.WARN
    )
  end
  return client
end

function M.request(client, method, params, handler, bufnr)
  if has_011 then
    return client:request(method, params, handler, bufnr)
  end
  return client.request(method, params, handler, bufnr)
end

function M.cancel(client, id)
  if has_011 then
    client:cancel_request(id)
  else
    client.cancel_request(id)
  end
end

return M
