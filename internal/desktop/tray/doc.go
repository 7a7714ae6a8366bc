// Package tray is the desktop tray client, wirelane-tray: a
// StatusNotifierItem with a dbusmenu (fyne.io/systray) that shows the
// service's tunnels and switches them, talking only to the service's API
// (internal/control/service/client) and its event stream.
//
// It is split in two. The model is pure: State follows the event stream
// (Apply) and says which notifications a change deserves; Build turns a
// State into the menu (items, labels, check states, submenus, the overflow
// of many tunnels), Tooltip and IconFor into the rest of the tray. None of
// it touches D-Bus, so the unit tests read it directly. The glue (Run)
// connects the service, renders the model with systray, runs the clicks,
// the file chooser (the XDG desktop portal, else zenity), the credential
// dialogs (zenity) and the notifications (org.freedesktop.Notifications).
package tray
