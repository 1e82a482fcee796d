-- Drives the dllm plugin's next edits in a real headless Neovim against the real server;
-- test_neovim_next_edit.py runs it as
--   nvim --clean --headless --cmd 'set rtp^=editors/nvim' -c 'luafile drive_next_edit.lua' area.py
-- Environment: DLLM_LS (server command), DLLM_RESULT (JSON lines are appended there; the last is
-- {"step": "done"}), DLLM_SHOTS (a folder: the screen, as text, with the preview and after the
-- edit is applied), DLLM_SECOND and DLLM_THIRD (two more files with the same text: the
-- dismissal, and the keys in Insert mode).

local api = vim.api
local here = debug.getinfo(1, 'S').source:sub(2):match('(.*/)') or './'
local h = dofile(here .. 'harness.lua')
local emit, sleep, wait_for, keys, lines = h.emit, h.sleep, h.wait_for, h.keys, h.lines

local function text_between(row, col, end_row, end_col)
  return table.concat(api.nvim_buf_get_text(0, row, col, end_row, end_col, {}), '\n')
end

--- The preview on screen, from the plugin's extmarks: the text marked deleted, the text shown
--- inline (and its position), the row of the sign; nil when there are none.
local function preview()
  local ns = require('dllm.next_edit').ns
  local marks = api.nvim_buf_get_extmarks(0, ns, 0, -1, { details = true })
  if #marks == 0 then
    return nil
  end
  local p = {}
  for _, m in ipairs(marks) do
    local row, col, d = m[2], m[3], m[4]
    if d.hl_group == 'DllmNextEditDelete' then
      p.deleted = text_between(row, col, d.end_row, d.end_col)
      p.deleted_at = { row, col }
    end
    if d.virt_text then
      p.added, p.added_at, p.pos = h.chunks(d.virt_text), { row, col }, d.virt_text_pos
      p.added_hl = d.virt_text[1][2]
    end
    if d.sign_text then
      p.sign_row, p.sign = row, vim.trim(d.sign_text)
    end
  end
  return p
end

--- The screen as text, every cell read back after a redraw; under each row that shows the
--- preview, a row marking its cells: `-` the deleted text's highlight, `+` the new text's.
local function screen(p)
  vim.cmd('redraw!')
  local del_attr, add_attr
  if p and p.deleted_at then
    local pos = vim.fn.screenpos(0, p.deleted_at[1] + 1, p.deleted_at[2] + 1)
    del_attr = vim.fn.screenattr(pos.row, pos.col)
    add_attr = vim.fn.screenattr(pos.row, pos.col + vim.fn.strdisplaywidth(p.deleted))
  end
  local out = {}
  for r = 1, vim.o.lines do
    local cells, marks, marked = {}, {}, false
    for c = 1, vim.o.columns do
      table.insert(cells, vim.fn.screenstring(r, c))
      local a = vim.fn.screenattr(r, c)
      local mark = (a == del_attr and '-') or (a == add_attr and '+') or ' '
      marked = marked or mark ~= ' '
      table.insert(marks, mark)
    end
    table.insert(out, (table.concat(cells):gsub('%s+$', '')))
    if marked then
      table.insert(out, (table.concat(marks):gsub('%s+$', '')))
    end
  end
  return table.concat(out, '\n') .. '\n'
end

local function shot(name, p, legend)
  local dir = os.getenv('DLLM_SHOTS')
  local text = screen(p)
  if dir and dir ~= '' then
    vim.fn.mkdir(dir, 'p')
    local f = assert(io.open(dir .. '/' .. name, 'w'))
    f:write(legend, '\n\n', text)
    f:close()
  end
  return text
end

local function status(client)
  return h.status(client, require('dllm').request)
end

local function normal_mode()
  wait_for(5, function()
    return api.nvim_get_mode().mode == 'n'
  end)
end

--- Renames the parameter w to width (the cursor on it, `ciw`, as a person does it) and waits for
--- the preview.
local function rename_and_wait()
  h.rename_w()
  normal_mode()
  return wait_for(60, preview)
end

local function run()
  vim.o.lines, vim.o.columns = 8, 48
  vim.o.number, vim.o.signcolumn = true, 'yes'
  local dllm = require('dllm')
  dllm.setup({
    cmd = { assert(os.getenv('DLLM_LS')) },
    init_options = { model = 'builtin', device = 'cpu' },
    inline = false, -- next edits only: no ghost text on the screen
  })
  local client = h.start(function()
    return dllm.client(0)
  end, 240, dllm.request, function()
    return {
      forwarded = dllm.config.init_options.nextEdits,
      tab = vim.fn.maparg('<Tab>', 'n'), -- nothing shown yet: the normal Tab
    }
  end)
  if not client then
    return
  end

  local original = lines()
  local p = rename_and_wait()
  local cursor = api.nvim_win_get_cursor(0)
  emit({
    step = 'preview',
    ok = p ~= nil,
    preview = p,
    cursor = cursor,
    lines = lines(),
    original = original,
    tab = vim.fn.maparg('<Tab>', 'n') ~= '',
    last = not p and require('dllm.next_edit').last or nil,
  })
  if not p then
    return
  end
  local legend = '-: DllmNextEditDelete (DiffDelete, struck through)  +: DllmNextEditAdd (DiffAdd)'
  emit({ step = 'shot_preview', ok = true, screen = shot('nvim_next_edit_preview.txt', p, legend) })

  -- <Tab>: the cursor goes to the edit's line, the buffer stays as it was.
  local before = lines()
  local jumped = h.tab(h.on_row(p.deleted_at[1] + 1))
  local after_jump = preview()
  emit({
    step = 'jump',
    ok = jumped ~= nil and vim.deep_equal(lines(), before) and after_jump ~= nil,
    cursor = api.nvim_win_get_cursor(0),
    preview = after_jump,
  })

  -- <Tab> again: applied, the preview gone, its command run (the server counts it).
  local applied = h.tab(h.changed(before))
  sleep(200)
  emit({
    step = 'apply',
    ok = applied ~= nil,
    lines = lines(),
    cursor = api.nvim_win_get_cursor(0),
    accepted = require('dllm.next_edit').accepted,
  })
  local caption = 'after <Tab> (to line 2) and <Tab> again (applied): no preview left'
  local applied_screen = shot('nvim_next_edit_applied.txt', nil, caption)
  emit({ step = 'shot_applied', ok = true, screen = applied_screen })

  -- dllm/status's next edits: { asked, kinds = { rename = { suggested, shown, accepted } } }
  local function next_edits()
    local s = status(client)
    return s and s.next_edits or {}
  end
  local function rename_counts(n)
    return type(n.kinds) == 'table' and type(n.kinds.rename) == 'table' and n.kinds.rename or {}
  end
  -- the command is a request of its own: wait for its count
  local counted = wait_for(10, function()
    local n = next_edits()
    return rename_counts(n).accepted == 1 and n
  end) or next_edits()
  emit({
    step = 'counts',
    ok = true,
    next_edits = counted,
    command = require('dllm.next_edit').last_command,
  })

  -- The same rename in a second file; <Esc> dismisses the preview and leaves the text alone.
  vim.cmd('edit ' .. vim.fn.fnameescape(assert(os.getenv('DLLM_SECOND'))))
  wait_for(30, function()
    return dllm.client(0)
  end)
  local second = rename_and_wait()
  local renamed = lines()
  keys('<Esc>', 'm')
  local gone = wait_for(5, function()
    return preview() == nil
  end)
  sleep(300)
  emit({
    step = 'dismiss',
    ok = second ~= nil and gone ~= nil,
    preview = second,
    lines = lines(),
    renamed = renamed,
    mode = api.nvim_get_mode().mode,
    tab = vim.fn.maparg('<Tab>', 'n'), -- the normal Tab again
    accepted = require('dllm.next_edit').accepted,
  })
  emit({ step = 'counts_after', ok = true, next_edits = next_edits() })

  -- In Insert mode: the preview comes while typing; <Tab> goes to the edit, <Tab> applies it,
  -- and Insert mode stays.
  vim.cmd('edit ' .. vim.fn.fnameescape(assert(os.getenv('DLLM_THIRD'))))
  wait_for(30, function()
    return dllm.client(0)
  end)
  h.rename_w(true)
  local typed = wait_for(60, preview)
  local mode = api.nvim_get_mode().mode
  local at = h.tab(function()
    return h.on_row(2)() and api.nvim_win_get_cursor(0)
  end)
  local jumped_lines = lines()
  h.tab(h.changed(jumped_lines))
  emit({
    step = 'insert_mode',
    ok = typed ~= nil,
    preview = typed,
    mode = mode,
    jumped_to = at,
    jumped_lines = jumped_lines,
    lines = lines(),
    mode_after = api.nvim_get_mode().mode,
    accepted = require('dllm.next_edit').accepted,
  })
  keys('<Esc>', 'n')
  normal_mode()
end

h.watchdog(300)

h.run(run)
