-- Drives the dllm plugin in a real headless Neovim against a Mercury-shaped completion API
-- (engineAddress "openai+URL"); test_neovim_fim.py runs it as
--   nvim --clean --headless --cmd 'set rtp^=editors/nvim' -c 'luafile drive_fim.lua' add.py
-- Environment: DLLM_LS (server command), DLLM_FIM_ADDRESS (the openai+ address), DLLM_RESULT
-- (JSON lines are appended there; the last is {"step": "done"}). The key comes to the server
-- in $DLLM_API_KEY, from the test's environment.

local api = vim.api
local here = debug.getinfo(1, 'S').source:sub(2):match('(.*/)') or './'
local h = dofile(here .. 'harness.lua')
local emit, wait_for, keys = h.emit, h.wait_for, h.keys

--- The ghost text on screen (the plugin's own or Neovim's), as one string, or nil.
local function ghost_text()
  local spaces = api.nvim_get_namespaces()
  for _, name in ipairs({ 'dllm.ghost', 'nvim.lsp.inline_completion' }) do
    local ns = spaces[name]
    if ns then
      for _, m in ipairs(api.nvim_buf_get_extmarks(0, ns, 0, -1, { details = true })) do
        local d = m[4]
        if d.virt_text then
          return (h.chunks(d.virt_text):gsub(' %(%d+/%d+%)$', ''))
        end
      end
    end
  end
end

local function status(client)
  return h.status(client, require('dllm').request)
end

local function run()
  local dllm = require('dllm')
  dllm.setup({
    cmd = { assert(os.getenv('DLLM_LS')) },
    -- no model here: the API's model fills, the server plans and finishes
    init_options = { engineAddress = assert(os.getenv('DLLM_FIM_ADDRESS')), model = '/nonexistent' },
  })
  local client = h.start(function()
    return dllm.client(0)
  end, 60, dllm.request, function(s)
    return { error = s and s.error, model = s and s.service_model, torch = s and s.torch_loaded }
  end)
  if not client then
    return
  end

  -- Line 2 is `    return`: typing its space is the automatic trigger.
  api.nvim_win_set_cursor(0, { 2, 0 })
  keys('A ', 'n')
  local ghost = wait_for(30, function()
    local g = ghost_text()
    return g ~= nil and g ~= '' and g
  end)
  emit({ step = 'ghost', ok = ghost ~= nil, text = ghost })
  if not ghost then
    emit({ step = 'debug', ok = false, status = status(client) })
    return
  end
  local tick = api.nvim_buf_get_changedtick(0)
  keys('<C-l>', 'm')
  wait_for(10, function()
    return api.nvim_buf_get_changedtick(0) ~= tick
  end)
  local lines = api.nvim_buf_get_lines(0, 0, -1, true)
  emit({ step = 'accept', ok = lines[2] == '    return a + b', line = lines[2], lines = lines })
  keys('<Esc>', 'n')
end

h.run(run)
