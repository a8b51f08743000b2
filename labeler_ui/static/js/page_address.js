// The server names the address this page should show (app/templating.page_address): the same
// page without a one-time notice's parameter, or the page a refused form post belongs to.
// Replacing it keeps a reload from repeating the notice, posting the form again or meeting a
// 405; the fragment (#members) stays.

{
  const address = document.querySelector('meta[name="page-address"]')?.content;
  if (address) history.replaceState(history.state, "", address + location.hash);
}
